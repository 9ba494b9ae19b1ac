"""Image understanding through transformers pipelines: detection, classification, segmentation, depth.

These four pipelines still exist in transformers 5; they handle pre- and post-processing for every
architecture the pipeline supports (DETR, YOLOS, ViT, SegFormer, Mask2Former, DPT, GLPN, ...).
The handlers turn their raw output into artifacts: an annotated image, a text summary, and data
shaped like the Hugging Face inference API's answers, so hosted and local results look alike.
controlnet.py reuses the depth and segmentation helpers below.
"""

from __future__ import annotations

import colorsys
from typing import Any

from models_local.handlers.base import Batching, Device, Handler, Outputs
from models_local.io import read_image

# Detections below this score are dropped; an input named "threshold" overrides it per call.
DETECTION_THRESHOLD = 0.5
TOP_K = 5  # classification labels reported
MAX_BATCH = 16  # pictures classified or searched for objects at once (a pipeline call takes a list)


def load_pipeline(task: str, source: str, device: Device) -> Any:
    from transformers import pipeline

    # transformers types pipeline() by literal task names only; `task` is one of them, held in a str
    return pipeline(task, model=source, device=device.name, dtype=device.dtype)  # type: ignore[call-overload]


def _loader(task: str):
    return lambda source, device: load_pipeline(task, source, device)


def palette(n: int) -> list[tuple[int, int, int]]:
    """n distinct, stable colours: hues spread by the golden ratio, so neighbours differ."""
    colours = []
    for i in range(n):
        r, g, b = colorsys.hsv_to_rgb((i * 0.618033988749895) % 1.0, 0.75, 0.95)
        colours.append((int(r * 255), int(g * 255), int(b * 255)))
    return colours


# ---- object detection ---------------------------------------------------------------------------


def _threshold(inputs: dict[str, str]) -> float:
    return float(inputs.get("threshold", DETECTION_THRESHOLD))


def _detect(pipe: Any, inputs: dict[str, str], out: Outputs) -> None:
    image = read_image(inputs["image"])
    _draw_objects(image, pipe(image, threshold=_threshold(inputs)), _threshold(inputs), out)


def _detect_batch(pipe: Any, inputs: list[dict[str, str]], outs: list[Outputs]) -> None:
    """Pictures that share a threshold, in one pipeline call: one forward pass when they have one
    size (detectors take each picture at its own size, and padding would change their boxes)."""
    images = [read_image(i["image"]) for i in inputs]
    threshold = _threshold(inputs[0])
    together = len(images) if len({im.size for im in images}) == 1 else 1
    found_all = pipe(images, threshold=threshold, batch_size=together)
    for image, found, out in zip(images, found_all, outs, strict=True):
        _draw_objects(image, found, threshold, out)


def _draw_objects(image: Any, found: list[dict[str, Any]], threshold: float, out: Outputs) -> None:
    from PIL import ImageDraw

    found = sorted(found, key=lambda f: -f["score"])
    objects = [
        {
            "label": f["label"],
            "score": round(float(f["score"]), 4),
            "box": {k: int(f["box"][k]) for k in ("xmin", "ymin", "xmax", "ymax")},
        }
        for f in found
    ]

    annotated = image.copy()
    draw = ImageDraw.Draw(annotated)
    labels = sorted({o["label"] for o in objects})
    colours = dict(zip(labels, palette(len(labels)), strict=True))
    width = max(1, round(max(image.size) / 200))
    for o in objects:
        b = o["box"]
        draw.rectangle((b["xmin"], b["ymin"], b["xmax"], b["ymax"]), outline=colours[o["label"]], width=width)
        draw.text(
            (b["xmin"] + width + 1, b["ymin"] + width),
            f"{o['label']} {o['score']:.2f}",
            fill=colours[o["label"]],
        )
    out.image(annotated)
    out.text(
        _count_summary([o["label"] for o in objects], "object")
        if objects
        else f"No object found with a score of at least {threshold:g}."
    )
    out.data(objects)


def _count_summary(labels: list[str], noun: str) -> str:
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    parts = ", ".join(f"{n} {label}" for label, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"Found {len(labels)} {noun}{'s' if len(labels) != 1 else ''}: {parts}."


# ---- classification -----------------------------------------------------------------------------


def _classify(pipe: Any, inputs: dict[str, str], out: Outputs) -> None:
    _report_labels(pipe(read_image(inputs["image"]), top_k=TOP_K), out)


def _classify_batch(pipe: Any, inputs: list[dict[str, str]], outs: list[Outputs]) -> None:
    images = [read_image(i["image"]) for i in inputs]
    # batch_size: without it a pipeline given a list still runs the pictures one by one
    for found, out in zip(pipe(images, top_k=TOP_K, batch_size=len(images)), outs, strict=True):
        _report_labels(found, out)


def _report_labels(found: list[dict[str, Any]], out: Outputs) -> None:
    labels = [{"label": f["label"], "score": round(float(f["score"]), 4)} for f in found]
    out.text(", ".join(f"{x['label']} ({x['score']:.2f})" for x in labels))
    out.data(labels)


# ---- segmentation -------------------------------------------------------------------------------


def segment(pipe: Any, image: Any) -> list[dict[str, Any]]:
    """Segments as {label, score, mask (bool numpy array, H x W)}, largest first."""
    import numpy as np

    segments = []
    for s in pipe(image):
        mask = np.asarray(s["mask"]) > 127
        if mask.any():
            segments.append({"label": s["label"], "score": s.get("score"), "mask": mask})
    return sorted(segments, key=lambda s: -int(s["mask"].sum()))


def _segment(pipe: Any, inputs: dict[str, str], out: Outputs) -> None:
    import numpy as np
    from PIL import Image

    image = read_image(inputs["image"])
    segments = segment(pipe, image)
    labels = sorted({s["label"] for s in segments})
    colours = dict(zip(labels, palette(len(labels)), strict=True))
    base = np.asarray(image, dtype=np.float32)
    overlay = base.copy()
    data = []
    for s in segments:
        mask = s["mask"]
        overlay[mask] = 0.45 * base[mask] + 0.55 * np.array(colours[s["label"]], dtype=np.float32)
        ys, xs = np.nonzero(mask)
        data.append(
            {
                "label": s["label"],
                "score": None if s["score"] is None else round(float(s["score"]), 4),
                "area": round(float(mask.mean()), 4),  # fraction of the image
                "box": {
                    "xmin": int(xs.min()),
                    "ymin": int(ys.min()),
                    "xmax": int(xs.max()),
                    "ymax": int(ys.max()),
                },
            }
        )
    out.image(Image.fromarray(overlay.clip(0, 255).astype(np.uint8)))
    out.text(", ".join(f"{d['label']} ({d['area']:.0%} of the image)" for d in data) or "No segment found.")
    out.data(data)
    if inputs.get("masks") == "png":  # the HF inference protocol answers with one mask per segment
        for s in segments:
            out.image(Image.fromarray(s["mask"].astype(np.uint8) * 255))


# ---- depth --------------------------------------------------------------------------------------


def depth_map(pipe: Any, image: Any) -> Any:
    """The model's relative depth at the image's size, as a float32 numpy array (H x W)."""
    import numpy as np

    raw = pipe(image)["predicted_depth"]
    depth = raw.detach().float().cpu().numpy().squeeze()
    if depth.shape != (image.height, image.width):  # some processors return the model's size
        from PIL import Image

        depth = np.asarray(Image.fromarray(depth).resize(image.size, Image.Resampling.BICUBIC))
    return np.nan_to_num(depth.astype(np.float32))


def depth_image(depth: Any) -> Any:
    """Depth scaled to 0-255 greyscale (near is bright for the usual inverse-depth models)."""
    import numpy as np
    from PIL import Image

    span = float(depth.max() - depth.min())
    scaled = (depth - depth.min()) / span if span > 0 else np.zeros_like(depth)
    return Image.fromarray((scaled * 255).round().astype(np.uint8))  # 2-D uint8: mode L


def _depth(pipe: Any, inputs: dict[str, str], out: Outputs) -> None:
    image = read_image(inputs["image"])
    out.image(depth_image(depth_map(pipe, image)))


_IMAGE = frozenset({"image"})  # what each call of a batch brings of its own
HANDLERS = {
    "object-detection": Handler(
        _loader("object-detection"), _detect, batch=Batching(_detect_batch, _IMAGE, MAX_BATCH)
    ),
    "image-classification": Handler(
        _loader("image-classification"), _classify, batch=Batching(_classify_batch, _IMAGE, MAX_BATCH)
    ),
    "image-segmentation": Handler(_loader("image-segmentation"), _segment),
    "depth-estimation": Handler(_loader("depth-estimation"), _depth),
}
