"""Vision and image+text tasks through models_local.run, on tiny random-weight models loaded by path.

Outputs of random weights are noise: these tests check the wiring (artifact kinds, files that decode,
sizes, data shapes). The canny detector and the depth-to-normal conversion have no weights, so their
outputs are checked against the picture drawn here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from stop_signal import StopAfter
from tiny_vision import draw_photo

import models_local
from models_local import RuntimeUnsupported
from models_local.handlers.controlnet import canny, normals_from_depth

PHOTO_SIZE = (48, 40)


@pytest.fixture(scope="module")
def photo(tmp_path_factory) -> str:
    return draw_photo(tmp_path_factory.mktemp("photo") / "photo.png", size=PHOTO_SIZE)


def run(task: str, model: str, out: Path, **inputs: str) -> list[dict]:
    artifacts = models_local.run(task, model, inputs, out)
    for a in artifacts:
        if "path" in a:
            assert Path(a["path"]).is_file() and Path(a["path"]).is_relative_to(out.resolve())
    return artifacts


def kinds(artifacts: list[dict]) -> list[str]:
    return [a["kind"] for a in artifacts]


def opened(artifact: dict, size: tuple[int, int] = PHOTO_SIZE, mode: str = "RGB") -> Image.Image:
    assert artifact["kind"] == "image" and artifact["path"].endswith(".png")
    with Image.open(artifact["path"]) as image:
        assert image.format == "PNG" and image.size == size and image.mode == mode
        return image.copy()


def test_object_detection_detr(tiny_detr, photo, tmp_path):
    artifacts = run("object-detection", tiny_detr, tmp_path, image=photo, threshold="0")
    assert kinds(artifacts) == ["image", "text", "data"]
    annotated = np.asarray(opened(artifacts[0]))
    objects = artifacts[2]["value"]
    assert len(objects) == 5  # the tiny DETR has 5 queries; threshold 0 keeps them all
    for o in objects:
        assert set(o) == {"label", "score", "box"} and o["label"].startswith("class") and 0 <= o["score"] <= 1
        assert 0 <= o["box"]["xmin"] <= o["box"]["xmax"] <= PHOTO_SIZE[0]
        assert 0 <= o["box"]["ymin"] <= o["box"]["ymax"] <= PHOTO_SIZE[1]
    assert not np.array_equal(annotated, np.asarray(Image.open(photo)))  # boxes were drawn
    assert artifacts[1]["value"].startswith("Found 5 objects")


def test_object_detection_default_threshold_drops_weak_boxes(tiny_detr, photo, tmp_path):
    artifacts = run("object-detection", tiny_detr, tmp_path, image=photo)
    assert all(o["score"] >= 0.5 for o in artifacts[2]["value"])
    if not artifacts[2]["value"]:
        assert artifacts[1]["value"].startswith("No object found")


def test_image_classification_vit(tiny_vit, photo, tmp_path):
    artifacts = run("image-classification", tiny_vit, tmp_path, image=photo)
    assert kinds(artifacts) == ["text", "data"]
    labels = artifacts[1]["value"]
    assert len(labels) == 5 and all(set(x) == {"label", "score"} for x in labels)
    scores = [x["score"] for x in labels]
    assert scores == sorted(scores, reverse=True) and sum(scores) <= 1.0001
    assert labels[0]["label"] in artifacts[0]["value"]


def test_image_segmentation_segformer(tiny_segformer, photo, tmp_path):
    artifacts = run("image-segmentation", tiny_segformer, tmp_path, image=photo)
    assert kinds(artifacts) == ["image", "text", "data"]
    opened(artifacts[0])
    segments = artifacts[2]["value"]
    assert segments and all(set(s) == {"label", "score", "area", "box"} for s in segments)
    assert abs(sum(s["area"] for s in segments) - 1.0) < 0.01  # semantic segments tile the image


def test_depth_estimation_dpt(tiny_dpt, photo, tmp_path):
    artifacts = run("depth-estimation", tiny_dpt, tmp_path, image=photo)
    assert kinds(artifacts) == ["image"]
    depth = np.asarray(opened(artifacts[0], mode="L"))
    assert depth.min() == 0 and depth.max() == 255  # scaled to the full grey range


def test_image_to_text_blip(tiny_blip, photo, tmp_path):
    artifacts = run("image-to-text", tiny_blip, tmp_path, image=photo)
    assert kinds(artifacts) == ["text"] and artifacts[0]["value"].strip()


def test_a_stop_ends_captioning_at_the_next_token(tiny_blip, photo, tmp_path):
    stop = StopAfter(1)
    with pytest.raises(models_local.Stopped):
        models_local.run("image-to-text", tiny_blip, {"image": photo}, tmp_path, stop=stop)
    assert stop.asked >= 2  # generate() looked


def test_image_to_text_vision_encoder_decoder(tiny_vit_gpt2, photo, tmp_path):
    # an image processor and a tokenizer without a combined processor (like ViT-GPT2 captioners)
    artifacts = run("image-to-text", tiny_vit_gpt2, tmp_path, image=photo)
    assert kinds(artifacts) == ["text"] and isinstance(artifacts[0]["value"], str) and artifacts[0]["value"]


def test_image_to_text_chat_vlm(tiny_llava, photo, tmp_path):
    artifacts = run("image-to-text", tiny_llava, tmp_path, image=photo)
    assert kinds(artifacts) == ["text"]
    assert "ASSISTANT" not in artifacts[0]["value"]  # the prompt is not echoed back


def test_visual_question_answering_llava(tiny_llava, photo, tmp_path):
    artifacts = run(
        "visual-question-answering", tiny_llava, tmp_path, image=photo, text="what is in the image ?"
    )
    assert kinds(artifacts) == ["text"] and artifacts[0]["value"]
    assert "what is in the image" not in artifacts[0]["value"]


def test_visual_question_answering_blip(tiny_blip_vqa, photo, tmp_path):
    artifacts = run(
        "visual-question-answering", tiny_blip_vqa, tmp_path, image=photo, text="what is in the image ?"
    )
    assert kinds(artifacts) == ["text"] and artifacts[0]["value"]


def test_visual_question_answering_vilt_classifier(tiny_vilt, photo, tmp_path):
    artifacts = run(
        "visual-question-answering", tiny_vilt, tmp_path, image=photo, text="what is in the image ?"
    )
    assert kinds(artifacts) == ["text", "data"]
    answers = artifacts[1]["value"]
    assert answers[0]["answer"] == artifacts[0]["value"] and len(answers) == 5


def test_document_question_answering_donut(tiny_donut, photo, tmp_path):
    artifacts = run(
        "document-question-answering", tiny_donut, tmp_path, image=photo, text="what is the sky ?"
    )
    assert kinds(artifacts) == ["text"] and artifacts[0]["value"]
    assert "<s_" not in artifacts[0]["value"]  # task tokens are stripped


def test_document_question_answering_chat_vlm(tiny_llava, photo, tmp_path):
    artifacts = run(
        "document-question-answering", tiny_llava, tmp_path, image=photo, text="what is the total ?"
    )
    assert kinds(artifacts) == ["text"] and artifacts[0]["value"]


def test_document_question_answering_ocr_models_are_refused(tmp_path, photo):
    from transformers import LayoutLMConfig

    LayoutLMConfig(
        vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=20
    ).save_pretrained(tmp_path / "layoutlm")
    with pytest.raises(RuntimeUnsupported, match="OCR"):
        models_local.run(
            "document-question-answering",
            str(tmp_path / "layoutlm"),
            {"image": photo, "text": "total?"},
            tmp_path / "out",
        )


# ---- control images -----------------------------------------------------------------------------


def test_canny_control_outlines_the_shapes(photo, tmp_path):
    # canny has no weights: any folder stands for "the model"
    artifacts = run("canny-control", str(tmp_path), tmp_path / "out", image=photo)
    assert kinds(artifacts) == ["image"]
    edges = np.asarray(opened(artifacts[0]))
    assert set(np.unique(edges)) <= {0, 255} and (edges[..., 0] == edges[..., 2]).all()


def test_canny_detector_finds_edges_only_at_boundaries():
    grey = np.full((40, 60), 200, dtype=np.uint8)
    grey[10:30, 20:45] = 40  # a dark box on a light background
    edges = canny(grey)
    assert edges[20, 19:21].any() and edges[20, 44:46].any()  # left and right sides
    assert edges[9:11, 30].any() and edges[29:31, 30].any()  # top and bottom
    assert not edges[15:25, 25:40].any() and not edges[:5].any()  # flat areas stay empty
    assert edges.sum() < 4 * (20 + 25) * 2  # thin: about one pixel wide


def test_normals_from_depth_face_the_slope():
    x = np.linspace(0, 1, 32, dtype=np.float32)
    ramp = np.tile(x, (32, 1))  # nearer towards the right: the surface faces left
    normals = normals_from_depth(ramp)
    assert normals.shape == (32, 32, 3) and normals.dtype == np.uint8
    centre = normals[8:24, 8:24].reshape(-1, 3).astype(int)
    assert (centre[:, 0] < 128).all() and (abs(centre[:, 1] - 128) <= 1).all() and (centre[:, 2] > 128).all()
    flat = normals_from_depth(np.zeros((8, 8), dtype=np.float32))
    assert (flat == [128, 128, 255]).all()


@pytest.mark.parametrize("control", ["depth", "normal"])
def test_depth_and_normal_control_dpt(control, tiny_dpt, photo, tmp_path):
    artifacts = run(f"{control}-control", tiny_dpt, tmp_path, image=photo)
    assert kinds(artifacts) == ["image"]
    opened(artifacts[0])


def test_seg_control_segformer(tiny_segformer, photo, tmp_path):
    artifacts = run("seg-control", tiny_segformer, tmp_path, image=photo)
    colours = np.unique(np.asarray(opened(artifacts[0])).reshape(-1, 3), axis=0)
    assert 1 <= len(colours) <= 5  # one colour per class found; the tiny model has 5 classes


@pytest.mark.parametrize("model", ["tiny_vitpose", "tiny_vitpose_plus"])
def test_openpose_control_vitpose(model, request, photo, tmp_path):
    artifacts = run("openpose-control", request.getfixturevalue(model), tmp_path, image=photo)
    assert kinds(artifacts) == ["image", "data"]
    opened(artifacts[0])
    people = artifacts[1]["value"]
    assert len(people) == 1 and len(people[0]) == 18  # OpenPose's 18 keypoints, neck included
    assert all(set(p) == {"x", "y", "score"} for p in people[0])


@pytest.mark.parametrize("control", ["hed", "mlsd"])
def test_hed_and_mlsd_control_are_not_served(control, photo, tmp_path):
    assert f"{control}-control" not in models_local.SUPPORTED_TASKS
    assert f"{control}-text-to-image" in models_local.SUPPORTED_TASKS
    with pytest.raises(RuntimeUnsupported):
        models_local.run(f"{control}-control", str(tmp_path), {"image": photo}, tmp_path)


@pytest.mark.parametrize(
    ("task", "model", "extra"),
    [
        ("object-detection", "tiny_detr", {"threshold": "0"}),
        ("depth-estimation", "tiny_dpt", {}),
        ("visual-question-answering", "tiny_llava", {"text": "what is it ?"}),
        ("visual-question-answering", "tiny_vilt", {"text": "what is it ?"}),
        ("document-question-answering", "tiny_donut", {"text": "what is it ?"}),
        ("openpose-control", "tiny_vitpose", {}),
    ],
)
def test_half_precision_inputs_follow_the_model(task, model, extra, request, photo, tmp_path):
    """On a GPU the runtime loads in float16: pixel inputs must be cast to it (checked here on CPU)."""
    import torch

    from models_local.gate import LOAD_GATE
    from models_local.handlers import HANDLERS, Device, Outputs

    handler = HANDLERS[task]
    with LOAD_GATE.hold(torch.float16):  # as the runtime loads: no other load may overlap this one
        loaded = handler.load(request.getfixturevalue(model), Device("cpu", torch.float16))
    assert torch.get_default_dtype() == torch.float32  # a float16 default would poison later tests
    out = Outputs(tmp_path)
    handler.call(loaded, {"image": photo, **extra}, out)
    assert out.artifacts and out.artifacts[0]["kind"] in ("image", "text")
