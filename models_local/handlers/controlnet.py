"""ControlNet: control images made from a photo, and images drawn from a control image and a prompt.

Control images ("<c>-control"):
- canny: the Canny edge detector, written here with numpy/scipy (no model; the model named is unused);
- depth, normal: a depth-estimation model (DPT, GLPN, ...); normals are derived from its depth map;
- seg: a semantic-segmentation model, each class painted a fixed colour;
- openpose: a transformers pose model (ViTPose), the whole image taken as one person box, drawn as an
  OpenPose-style skeleton.
hed and mlsd need the HED and M-LSD annotator networks, which neither transformers nor diffusers ships:
no handler is registered for them, so the runtime reports them unsupported (the caller falls back).

Generation ("<c>-text-to-image"): StableDiffusionControlNetPipeline. The model is either a whole
pipeline folder (model_index.json) or a bare ControlNetModel (what hub ControlNet repos hold), which
is combined with the Stable Diffusion base named by HUGGINGGPT_CONTROLNET_BASE.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models_local.handlers import diffusion, vision
from models_local.handlers.base import Device, Handler, Outputs, RuntimeUnsupported
from models_local.handlers.bundle import tensors_to
from models_local.io import read_image

BASE_ENV = "HUGGINGGPT_CONTROLNET_BASE"
DEFAULT_BASE = "stable-diffusion-v1-5/stable-diffusion-v1-5"
CANNY_LOW, CANNY_HIGH = 100.0, 200.0  # thresholds on the Sobel gradient of 0-255 grey levels
KEYPOINT_THRESHOLD = 0.3  # pose keypoints below this confidence are not drawn


def _rgb(array: Any) -> Any:
    from PIL import Image

    return Image.fromarray(array).convert("RGB")  # ControlNets take 3-channel control images


# ---- canny --------------------------------------------------------------------------------------


def canny(grey: Any, low: float = CANNY_LOW, high: float = CANNY_HIGH) -> Any:
    """Canny edges of a 2-D grey image (0-255) as a bool array: Sobel gradients, thinning to local
    maxima along the gradient direction, then hysteresis (weak edges kept only where they touch a
    strong one)."""
    import numpy as np
    from scipy import ndimage

    g = np.asarray(grey, dtype=np.float32)
    gx = ndimage.sobel(g, axis=1)
    gy = ndimage.sobel(g, axis=0)
    magnitude = np.abs(gx) + np.abs(gy)

    # Quantise the gradient direction to 0, 45, 90 or 135 degrees; compare with the two neighbours
    # along it (rows grow downwards, so a positive gy points down).
    angle = np.rad2deg(np.arctan2(gy, gx)) % 180
    padded = np.pad(magnitude, 1)
    h, w = magnitude.shape

    def shifted(dy: int, dx: int) -> Any:
        return padded[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]

    keep = np.zeros_like(magnitude, dtype=bool)
    for lo, hi, (dy, dx) in (
        (0, 22.5, (0, 1)),
        (157.5, 180.1, (0, 1)),
        (22.5, 67.5, (1, 1)),
        (67.5, 112.5, (1, 0)),
        (112.5, 157.5, (1, -1)),
    ):
        sector = (angle >= lo) & (angle < hi)
        keep |= sector & (magnitude >= shifted(dy, dx)) & (magnitude >= shifted(-dy, -dx))
    thin = np.where(keep, magnitude, 0)

    weak = thin >= low
    regions, _ = ndimage.label(weak, structure=np.ones((3, 3)))
    strong_regions = np.unique(regions[thin >= high])
    return np.isin(regions, strong_regions[strong_regions > 0]) & weak


@dataclass(frozen=True)
class Algorithm:
    name: str  # a control made without weights; the model argument is not used


def _canny(_: Algorithm, inputs: dict[str, str], out: Outputs) -> None:
    import numpy as np

    edges = canny(read_image(inputs["image"], mode="L"))
    out.image(_rgb(edges.astype(np.uint8) * 255))


# ---- depth and normals --------------------------------------------------------------------------


def _depth_control(pipe: Any, inputs: dict[str, str], out: Outputs) -> None:
    image = read_image(inputs["image"])
    out.image(vision.depth_image(vision.depth_map(pipe, image)).convert("RGB"))


def normals_from_depth(depth: Any, *, strength: float = 2.0) -> Any:
    """An RGB normal map (x right -> red, y up -> green, z towards the viewer -> blue) from relative
    inverse depth (larger is nearer), by Sobel gradients of the depth scaled to [0, 1]."""
    import numpy as np
    from scipy import ndimage

    d = np.asarray(depth, dtype=np.float32)
    span = float(d.max() - d.min())
    d = (d - d.min()) / span if span > 0 else np.zeros_like(d)
    # A near surface rising to the right faces left: the normal's x is minus the slope.
    nx = -ndimage.sobel(d, axis=1) * strength
    ny = ndimage.sobel(d, axis=0) * strength  # rows grow downwards; image y grows upwards
    nz = np.ones_like(d)
    n = np.stack([nx, ny, nz], axis=-1)
    n /= np.linalg.norm(n, axis=-1, keepdims=True)
    return ((n + 1) / 2 * 255).round().astype(np.uint8)


def _normal_control(pipe: Any, inputs: dict[str, str], out: Outputs) -> None:
    image = read_image(inputs["image"])
    out.image(_rgb(normals_from_depth(vision.depth_map(pipe, image))))


# ---- segmentation map ---------------------------------------------------------------------------


def _seg_control(pipe: Any, inputs: dict[str, str], out: Outputs) -> None:
    import numpy as np

    image = read_image(inputs["image"])
    # One colour per class id of the model (a stable palette; not the ADE20K palette some seg
    # ControlNets were trained with, so such models may read the classes differently).
    label2id = getattr(pipe.model.config, "label2id", None) or {}
    colours = vision.palette(max(len(label2id), 1))
    canvas = np.zeros((image.height, image.width, 3), dtype=np.uint8)
    for i, s in enumerate(reversed(vision.segment(pipe, image))):  # largest last: it wins overlaps
        canvas[s["mask"]] = colours[label2id.get(s["label"], i) % len(colours)]
    out.image(_rgb(canvas))


# ---- pose ---------------------------------------------------------------------------------------

# COCO's 17 keypoints -> OpenPose's 18 (OpenPose adds a neck, the middle of the shoulders).
# OpenPose order: nose, neck, r-shoulder, r-elbow, r-wrist, l-shoulder, l-elbow, l-wrist, r-hip,
# r-knee, r-ankle, l-hip, l-knee, l-ankle, r-eye, l-eye, r-ear, l-ear.
COCO_TO_OPENPOSE = [0, None, 6, 8, 10, 5, 7, 9, 12, 14, 16, 11, 13, 15, 2, 1, 4, 3]
LIMBS = [
    (1, 2),
    (1, 5),
    (2, 3),
    (3, 4),
    (5, 6),
    (6, 7),
    (1, 8),
    (8, 9),
    (9, 10),
    (1, 11),
    (11, 12),
    (12, 13),
    (1, 0),
    (0, 14),
    (14, 16),
    (0, 15),
    (15, 17),
]


@dataclass
class PoseModel:
    model: Any
    processor: Any
    device: Device


def _load_pose(source: str, device: Device) -> PoseModel:
    from transformers import AutoModelForPoseEstimation, AutoProcessor

    model = AutoModelForPoseEstimation.from_pretrained(source, dtype=device.dtype).to(device.name).eval()
    if model.config.num_labels < 17:  # COCO-WholeBody also starts with COCO's 17 body keypoints
        raise RuntimeUnsupported(f"{source} does not predict COCO's 17 body keypoints")
    return PoseModel(model, AutoProcessor.from_pretrained(source), device)


def pose_keypoints(pose: PoseModel, image: Any) -> list[list[tuple[float, float, float]]]:
    """Per person, 18 OpenPose keypoints as (x, y, score); the whole image is one person box."""
    import torch

    boxes = [[[0.0, 0.0, float(image.width), float(image.height)]]]  # COCO (x, y, w, h)
    enc = pose.processor(image, boxes=boxes, return_tensors="pt")
    enc = tensors_to(enc, pose.device)
    backbone = getattr(pose.model.config, "backbone_config", None)
    if getattr(backbone, "num_experts", 1) > 1:  # ViTPose+ mixes experts per dataset: 0 is COCO
        enc["dataset_index"] = torch.zeros(1, dtype=torch.long, device=pose.device.name)
    with torch.inference_mode():
        output = pose.model(**enc)
    output.heatmaps = output.heatmaps.float().cpu()
    people = []
    for person in pose.processor.post_process_pose_estimation(output, boxes=boxes)[0]:
        xy = person["keypoints"].tolist()
        scores = person["scores"].tolist()
        points = []
        for coco in COCO_TO_OPENPOSE:
            if coco is None:  # the neck
                (x5, y5), (x6, y6) = xy[5], xy[6]
                points.append(((x5 + x6) / 2, (y5 + y6) / 2, min(scores[5], scores[6])))
            else:
                points.append((xy[coco][0], xy[coco][1], scores[coco]))
        people.append(points)
    return people


def draw_pose(people: list[list[tuple[float, float, float]]], size: tuple[int, int]) -> Any:
    """An OpenPose-style skeleton on black: coloured limbs, joints as dots."""
    from PIL import Image, ImageDraw

    canvas = Image.new("RGB", size)
    draw = ImageDraw.Draw(canvas)
    width = max(2, round(max(size) / 100))
    colours = vision.palette(len(LIMBS))
    for points in people:
        for (a, b), colour in zip(LIMBS, colours, strict=True):
            if points[a][2] >= KEYPOINT_THRESHOLD and points[b][2] >= KEYPOINT_THRESHOLD:
                draw.line((points[a][:2], points[b][:2]), fill=colour, width=width)
        for x, y, score in points:
            if score >= KEYPOINT_THRESHOLD:
                draw.ellipse((x - width, y - width, x + width, y + width), fill=(255, 255, 255))
    return canvas


def _openpose_control(pose: PoseModel, inputs: dict[str, str], out: Outputs) -> None:
    image = read_image(inputs["image"])
    people = pose_keypoints(pose, image)
    out.image(draw_pose(people, image.size))
    out.data([[{"x": round(x, 1), "y": round(y, 1), "score": round(s, 3)} for x, y, s in p] for p in people])


# ---- generation from a control image ------------------------------------------------------------


def _load_controlnet(source: str, device: Device) -> Any:
    from diffusers import ControlNetModel, StableDiffusionControlNetPipeline

    diffusion.quiet()
    folder = Path(source)
    if (folder / "model_index.json").is_file():  # a whole ControlNet pipeline
        pipe = StableDiffusionControlNetPipeline.from_pretrained(source, dtype=device.dtype)
        return diffusion.place(pipe, device)
    config = json.loads((folder / "config.json").read_text()) if (folder / "config.json").is_file() else {}
    if config.get("_class_name") != "ControlNetModel":
        raise RuntimeUnsupported(f"{source} holds neither a ControlNet pipeline nor a ControlNetModel")
    controlnet = ControlNetModel.from_pretrained(source, dtype=device.dtype)
    base = os.environ.get(BASE_ENV) or DEFAULT_BASE
    pipe = StableDiffusionControlNetPipeline.from_pretrained(base, controlnet=controlnet, dtype=device.dtype)
    return diffusion.place(pipe, device)


def _control_to_image(pipe: Any, inputs: dict[str, str], out: Outputs) -> None:
    control = diffusion.fit(read_image(inputs["image"]), diffusion.default_side(pipe))
    result = pipe(
        prompt=inputs["text"],
        image=control,
        num_inference_steps=diffusion.STEPS,
        **diffusion.seeded(pipe, inputs),
        **diffusion.stoppable(pipe, out),
    )
    out.image(result.images[0])


CONTROLS = {
    "canny": Handler(lambda source, device: Algorithm("canny"), _canny, library="builtin"),
    # The vision handlers' own loaders: a model used for both shares one cached copy.
    "depth": Handler(vision.HANDLERS["depth-estimation"].load, _depth_control),
    "normal": Handler(vision.HANDLERS["depth-estimation"].load, _normal_control),
    "seg": Handler(vision.HANDLERS["image-segmentation"].load, _seg_control),
    "openpose": Handler(_load_pose, _openpose_control),
}
GENERATORS = ("canny", "depth", "hed", "mlsd", "normal", "openpose", "seg")

HANDLERS = {
    **{f"{c}-control": handler for c, handler in CONTROLS.items()},
    **{
        f"{c}-text-to-image": Handler(_load_controlnet, _control_to_image, library="diffusers")
        for c in GENERATORS
    },
}
