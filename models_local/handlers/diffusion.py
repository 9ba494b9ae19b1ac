"""Diffusers pipelines: text-to-image, image-to-image, text-to-video.

An input "seed" (a whole number, as text) makes a run reproducible: see seeded().

The settings below are module attributes: a deployment (or a test) may lower them.
Image sizes follow each model's own default (its UNet sample size times the VAE's scale factor).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from models_local.handlers.base import Batching, Device, Everyone, Handler, Outputs, RuntimeUnsupported
from models_local.io import read_image

STEPS = 25  # denoising steps per image or video
STRENGTH = 0.75  # image-to-image: how far from the input image the result may move
VIDEO_FRAMES = 16
VIDEO_FPS = 8
# A batch of images holds at most this many pixels (eight SD 1.5 images; two SDXL ones): its
# activations grow with it, on top of the weights the runtime's memory budget counts.
BATCH_PIXELS = 8 * 512 * 512
MAX_BATCH = 8


def quiet() -> None:
    import diffusers

    diffusers.utils.logging.disable_progress_bar()
    diffusers.utils.logging.set_verbosity_error()


def place(pipe: Any, device: Device) -> Any:
    pipe.set_progress_bar_config(disable=True)
    return pipe.to(device.name)


def load_pipeline(source: str, device: Device, **components: Any) -> Any:
    from diffusers import DiffusionPipeline

    quiet()
    return place(DiffusionPipeline.from_pretrained(source, dtype=device.dtype, **components), device)


def default_side(pipe: Any) -> int:
    """The image side the model was trained for (512 for SD 1.5)."""
    unet = getattr(pipe, "unet", None)
    sample = getattr(getattr(unet, "config", None), "sample_size", None)
    if isinstance(sample, (list, tuple)):
        sample = max(sample)
    return int(sample * getattr(pipe, "vae_scale_factor", 8)) if sample else 512


def fit(image: Any, side: int) -> Any:
    """Scale so the longer side is `side`, both sides multiples of 8 (the VAE downsamples by 8)."""
    scale = side / max(image.size)
    w, h = (max(8, round(x * scale / 8) * 8) for x in image.size)
    return image if (w, h) == image.size else image.resize((w, h))


def call_params(pipe: Any) -> frozenset[str]:
    """The argument names of the pipeline's __call__ (looked up once per pipeline class)."""
    cls: type = type(pipe)  # annotated: mypy does not take type[Any] for Hashable (the cache's key)
    return _class_call_params(cls)


@functools.cache
def _class_call_params(cls: type) -> frozenset[str]:
    return frozenset(inspect.signature(cls.__call__).parameters)


def seeded(pipe: Any, inputs: dict[str, str]) -> dict[str, Any]:
    """Call arguments that make the run reproducible when the inputs carry a seed: a generator of
    its own per call (the process-wide one is shared by every thread). On mps a CPU generator, as
    diffusers advises; elsewhere one on the pipeline's device, so the same seed gives the same
    image on the same device."""
    seed = inputs.get("seed")
    if seed is None or "generator" not in call_params(pipe):
        return {}
    import torch

    device = pipe.device if pipe.device.type != "mps" else torch.device("cpu")
    return {"generator": torch.Generator(device=device).manual_seed(int(seed))}


def seeded_batch(pipe: Any, inputs: list[dict[str, str]]) -> dict[str, Any]:
    """seeded() for a batch: a generator per image, so each image is the one its seed draws alone.
    Members without a seed get a generator from a random seed; none when no member has one."""
    if all(i.get("seed") is None for i in inputs) or "generator" not in call_params(pipe):
        return {}
    import random

    import torch

    device = pipe.device if pipe.device.type != "mps" else torch.device("cpu")
    seeds = [int(i["seed"]) if i.get("seed") is not None else random.getrandbits(63) for i in inputs]
    return {"generator": [torch.Generator(device=device).manual_seed(s) for s in seeds]}


def stoppable(pipe: Any, out: Outputs) -> dict[str, Any]:
    """Call arguments that end a diffusion run between two steps once `out.stop` is set: a Stop
    frees the GPU and the model within one step, not after the whole run. Newer pipelines take
    callback_on_step_end, older ones (text-to-video) callback; raising from either ends the call."""
    if out.stop is None:
        return {}
    params = call_params(pipe)
    if "callback_on_step_end" in params:

        def on_step_end(pipe: Any, step: int, timestep: Any, tensors: dict[str, Any]) -> dict[str, Any]:
            out.check_stop()
            return tensors

        return {"callback_on_step_end": on_step_end}
    if "callback" in params:
        return {"callback": lambda step, timestep, latents: out.check_stop(), "callback_steps": 1}
    return {}


# ---- text-to-image ------------------------------------------------------------------------------


def _load_text_to_image(source: str, device: Device) -> Any:
    from diffusers import AutoPipelineForText2Image

    quiet()
    # AutoPipeline refuses repos that are not text-to-image (video, upscalers, ...).
    return place(AutoPipelineForText2Image.from_pretrained(source, dtype=device.dtype), device)


def steps(inputs: dict[str, str]) -> int:
    """STEPS, or the caller's "steps" input (the inference protocol's num_inference_steps)."""
    value = int(inputs.get("steps") or STEPS)
    if not 1 <= value <= 1000:
        raise ValueError(f"steps must be between 1 and 1000, not {value}")
    return value


def _text_to_image(pipe: Any, inputs: dict[str, str], out: Outputs) -> None:
    result = pipe(
        prompt=inputs["text"],
        num_inference_steps=steps(inputs),
        **seeded(pipe, inputs),
        **stoppable(pipe, out),
    )
    out.image(result.images[0])


def _text_to_image_batch(pipe: Any, inputs: list[dict[str, str]], outs: list[Outputs]) -> None:
    """Calls that share steps (and everything but the prompt and seed) as one pipeline call."""
    result = pipe(
        prompt=[i["text"] for i in inputs],
        num_inference_steps=steps(inputs[0]),
        **seeded_batch(pipe, inputs),
        **stoppable(pipe, Everyone.of(outs)),
    )
    for out, image in zip(outs, result.images, strict=True):
        out.image(image)


def most_images(pipe: Any) -> int:
    return max(1, min(MAX_BATCH, BATCH_PIXELS // default_side(pipe) ** 2))


# ---- image-to-image -----------------------------------------------------------------------------


def _load_image_to_image(source: str, device: Device) -> Any:
    from diffusers import AutoPipelineForImage2Image

    pipe = load_pipeline(source, device)
    params = call_params(pipe)
    if "image" in params and "strength" not in params and "prompt" not in params:
        return pipe  # image variation pipelines: the image is the whole condition
    if "image" in params and "strength" in params:
        return pipe  # already an image-to-image pipeline
    # A text-to-image checkpoint: the same components as an img2img pipeline (raises if unknown).
    return place(AutoPipelineForImage2Image.from_pipe(pipe), device)


def _image_to_image(pipe: Any, inputs: dict[str, str], out: Outputs) -> None:
    image = fit(read_image(inputs["image"]), default_side(pipe))
    params = call_params(pipe)
    kwargs: dict[str, Any] = {"image": image, "num_inference_steps": steps(inputs)}
    if "prompt" in params:
        kwargs["prompt"] = inputs.get("text") or ""
    if "strength" in params:
        kwargs["strength"] = STRENGTH
    if "height" in params and "width" in params:  # pipelines that do not follow the input's size
        kwargs["width"], kwargs["height"] = image.size
    out.image(pipe(**kwargs, **seeded(pipe, inputs), **stoppable(pipe, out)).images[0])


# ---- text-to-video ------------------------------------------------------------------------------


def _load_text_to_video(source: str, device: Device) -> Any:
    from models_local import video

    if not video.available():
        raise RuntimeUnsupported("text-to-video needs the imageio-ffmpeg package to write MP4 files")
    pipe = load_pipeline(source, device)
    if "num_frames" not in call_params(pipe):
        raise RuntimeUnsupported(f"{type(pipe).__name__} is not a text-to-video pipeline")
    return pipe


def _text_to_video(pipe: Any, inputs: dict[str, str], out: Outputs) -> None:
    from models_local import video

    result = pipe(
        prompt=inputs["text"],
        num_inference_steps=STEPS,
        num_frames=VIDEO_FRAMES,
        output_type="np",
        **seeded(pipe, inputs),
        **stoppable(pipe, out),
    )
    frames = result.frames[0]  # (frames, height, width, 3) floats in [0, 1], first video of the batch
    out.file("video", video.write_mp4(frames, out.new_path(".mp4"), fps=VIDEO_FPS))


HANDLERS = {
    "text-to-image": Handler(
        _load_text_to_image,
        _text_to_image,
        library="diffusers",
        batch=Batching(_text_to_image_batch, frozenset({"text", "seed"}), most_images),
    ),
    "image-to-image": Handler(_load_image_to_image, _image_to_image, library="diffusers"),
    "text-to-video": Handler(_load_text_to_video, _text_to_video, library="diffusers"),
}
