"""Diffusers tasks through models_local.run: tiny Stable Diffusion, image-to-image, text-to-video and
ControlNet pipelines (random weights, 2 steps, 32x32), loaded by path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from stop_signal import StopAfter
from tiny_vision import draw_photo

import models_local
from models_local import RuntimeUnsupported
from models_local.handlers import controlnet, diffusion
from models_local.video import read_mp4

SIDE = 32  # the tiny models' default image side (16x16 latents, VAE scale 2)


@pytest.fixture(autouse=True)
def few_steps(monkeypatch):
    monkeypatch.setattr(diffusion, "STEPS", 2)
    monkeypatch.setattr(diffusion, "VIDEO_FRAMES", 4)


@pytest.fixture(scope="module")
def photo(tmp_path_factory) -> str:
    return draw_photo(tmp_path_factory.mktemp("photo") / "photo.png", size=(48, 40))


def only_image(artifacts: list[dict], size: tuple[int, int]) -> np.ndarray:
    assert [a["kind"] for a in artifacts] == ["image"]
    with Image.open(artifacts[0]["path"]) as image:
        assert image.format == "PNG" and image.size == size and image.mode == "RGB"
        pixels = np.asarray(image)
    assert pixels.std() > 0  # decoded latents, not a blank canvas
    return pixels


def test_text_to_image_stable_diffusion(tiny_sd, tmp_path):
    artifacts = models_local.run("text-to-image", tiny_sd, {"text": "a red cat"}, tmp_path)
    only_image(artifacts, (SIDE, SIDE))
    assert Path(artifacts[0]["path"]).parent == tmp_path.resolve()


def test_image_to_image_from_a_text_to_image_checkpoint(tiny_sd, photo, tmp_path):
    artifacts = models_local.run("image-to-image", tiny_sd, {"image": photo, "text": "a blue dog"}, tmp_path)
    only_image(artifacts, (SIDE, 24))  # 48x40 fitted to the 32 side, rounded to multiples of 8


def test_image_to_image_without_prompt(tiny_sd, photo, tmp_path):
    only_image(models_local.run("image-to-image", tiny_sd, {"image": photo}, tmp_path), (SIDE, 24))


def test_image_to_image_image_variation(tiny_sd_image_variation, photo, tmp_path):
    # the prompt has no place in an image-conditioned pipeline: it is not passed
    artifacts = models_local.run(
        "image-to-image", tiny_sd_image_variation, {"image": photo, "text": "x"}, tmp_path
    )
    only_image(artifacts, (SIDE, 24))


def test_text_to_video_mp4(tiny_text_to_video, tmp_path):
    artifacts = models_local.run("text-to-video", tiny_text_to_video, {"text": "a cat walking"}, tmp_path)
    assert [a["kind"] for a in artifacts] == ["video"] and artifacts[0]["path"].endswith(".mp4")
    frames, size = read_mp4(artifacts[0]["path"])
    assert size == (SIDE, SIDE) and frames.shape == (4, SIDE, SIDE, 3)


def test_text_to_video_refuses_an_image_pipeline(tiny_sd, tmp_path):
    with pytest.raises(RuntimeUnsupported, match="not a text-to-video"):
        models_local.run("text-to-video", tiny_sd, {"text": "a cat"}, tmp_path)


def test_text_to_image_refuses_a_video_pipeline(tiny_text_to_video, tmp_path):
    with pytest.raises(RuntimeUnsupported):
        models_local.run("text-to-image", tiny_text_to_video, {"text": "a cat"}, tmp_path)


@pytest.mark.parametrize("control", ["canny", "depth", "hed", "mlsd", "normal", "openpose", "seg"])
def test_controlnet_text_to_image_bare_controlnet_with_base(
    control, tiny_controlnet, tiny_sd, photo, tmp_path, monkeypatch
):
    monkeypatch.setenv(controlnet.BASE_ENV, tiny_sd)  # the base model a bare ControlNet is combined with
    artifacts = models_local.run(
        f"{control}-text-to-image", tiny_controlnet, {"image": photo, "text": "a cat"}, tmp_path
    )
    only_image(artifacts, (SIDE, 24))


def test_controlnet_text_to_image_whole_pipeline(tiny_sd_controlnet, photo, tmp_path):
    artifacts = models_local.run(
        "canny-text-to-image", tiny_sd_controlnet, {"image": photo, "text": "a cat"}, tmp_path
    )
    only_image(artifacts, (SIDE, 24))


def test_controlnet_refuses_a_folder_without_a_controlnet(tmp_path, photo):
    (tmp_path / "config.json").write_text('{"_class_name": "UNet2DConditionModel"}')
    with pytest.raises(RuntimeUnsupported, match="ControlNet"):
        models_local.run(
            "seg-text-to-image", str(tmp_path), {"image": photo, "text": "a cat"}, tmp_path / "out"
        )


def test_control_image_feeds_controlnet(tiny_controlnet, tiny_sd, photo, tmp_path, monkeypatch):
    """A plan's two steps: photo -> canny control image -> image drawn from it and a prompt."""
    monkeypatch.setenv(controlnet.BASE_ENV, tiny_sd)
    edges = models_local.run("canny-control", str(tmp_path), {"image": photo}, tmp_path / "a")[0]["path"]
    drawn = models_local.run(
        "canny-text-to-image", tiny_controlnet, {"image": edges, "text": "a cat"}, tmp_path / "b"
    )
    only_image(drawn, (SIDE, 24))


@pytest.mark.parametrize(
    ("task", "model", "inputs"),
    [
        ("text-to-image", "tiny_sd", {"text": "a cat"}),  # callback_on_step_end
        ("image-to-image", "tiny_sd", {"text": "a cat"}),
        ("image-to-image", "tiny_sd_image_variation", {}),
        ("text-to-video", "tiny_text_to_video", {"text": "a cat"}),  # the older per-step callback
        ("canny-text-to-image", "tiny_sd_controlnet", {"text": "a cat"}),
    ],
)
def test_a_stop_ends_a_diffusion_run_between_steps(task, model, inputs, request, photo, tmp_path):
    folder = request.getfixturevalue(model)
    inputs = {**inputs, "image": photo} if task in ("image-to-image", "canny-text-to-image") else inputs
    stop = StopAfter(1)  # the runtime's check before the call passes; the one after step 1 stops it
    with pytest.raises(models_local.Stopped):
        models_local.run(task, folder, inputs, tmp_path, stop=stop)
    assert stop.asked == 2  # stopped after the first of the 2 steps, not before, and not at the end
    assert not any(tmp_path.iterdir())  # no half-made file

    stop = StopAfter(0)  # stopped while waiting for the model: the call does not start
    with pytest.raises(models_local.Stopped):
        models_local.run(task, folder, inputs, tmp_path, stop=stop)
    assert stop.asked == 1


@pytest.mark.parametrize(
    ("task", "model"), [("text-to-image", "tiny_sd"), ("text-to-video", "tiny_text_to_video")]
)
def test_half_precision_pipelines(task, model, request, tmp_path):
    """On a GPU the runtime loads in float16 (checked here on CPU)."""
    import torch

    from models_local.gate import LOAD_GATE
    from models_local.handlers import HANDLERS, Device, Outputs

    handler = HANDLERS[task]
    with LOAD_GATE.hold(torch.float16):  # as the runtime loads: no other load may overlap this one
        pipe = handler.load(request.getfixturevalue(model), Device("cpu", torch.float16))
    assert torch.get_default_dtype() == torch.float32  # a float16 default would blacken later images
    assert pipe.unet.dtype == torch.float16
    out = Outputs(tmp_path)
    handler.call(pipe, {"text": "a cat"}, out)
    assert [a["kind"] for a in out.artifacts] == [task.rsplit("-", 1)[-1]]
