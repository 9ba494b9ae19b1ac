"""A small Gradio app that stands in for a Space (and, with mcp_server=True, an MCP server), plus
hostile variants, for the expert tests. Launched on 127.0.0.1 in the test process."""

# (no `from __future__ import annotations`: Gradio reads `request: gr.Request` at definition time)

import json
import time
import wave
from pathlib import Path

import numpy as np
from PIL import Image


def invert(image: Image.Image) -> Image.Image:
    """Invert the colours of an image.

    Args:
        image: the picture to invert
    """
    return Image.fromarray(255 - np.asarray(image.convert("RGB")))


def beep(text: str, seconds: float = 0.5) -> str:
    """Read a text aloud as a beep whose pitch depends on the text.

    Args:
        text: the text to read
        seconds: how long the sound lasts
    """
    rate = 8000
    pitch = 200 + 10 * (len(text) % 50)
    t = np.arange(int(rate * max(0.1, min(float(seconds), 2.0)))) / rate
    samples = (np.sin(2 * np.pi * pitch * t) * 12000).astype(np.int16)
    path = Path(__import__("tempfile").mkdtemp()) / "beep.wav"
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.tobytes())
    return str(path)


def sketch(text: str) -> tuple[Image.Image, str]:
    """Draw a picture of a text and describe it.

    Args:
        text: what to draw
    """
    shade = 40 + 7 * (len(text) % 30)
    return Image.new("RGB", (32, 24), (shade, 255 - shade, 128)), f"a {shade} picture of {text}"


def slow(text: str) -> str:
    """Wait a long time before answering.

    Args:
        text: anything
    """
    time.sleep(600)
    return text


def build(extra: bool = False):  # noqa: ANN201 (gradio is imported lazily: tests only)
    import gradio as gr

    with gr.Blocks() as demo:
        img_in, img_out = gr.Image(type="pil"), gr.Image(type="pil")
        gr.Button("invert").click(invert, img_in, img_out, api_name="invert")
        text, secs, audio = gr.Textbox(), gr.Number(value=0.5), gr.Audio(type="filepath")
        gr.Button("beep").click(beep, [text, secs], audio, api_name="beep")
        sk_in, sk_img, sk_text = gr.Textbox(), gr.Image(type="pil"), gr.Textbox()
        gr.Button("sketch").click(sketch, sk_in, [sk_img, sk_text], api_name="sketch")
        if extra:
            s_in, s_out = gr.Textbox(), gr.Textbox()
            gr.Button("slow").click(slow, s_in, s_out, api_name="slow")

            def headers(text: str, request: gr.Request) -> str:
                """Say which headers the call came with."""
                return json.dumps(dict(request.headers))

            def quota(text: str) -> str:
                """Refuse as a ZeroGPU Space does when the visitor's quota is spent."""
                raise gr.Error("You have exceeded your GPU quota (60s requested vs. 0s left).")

            for fn in (headers, quota):
                box_in, box_out = gr.Textbox(), gr.Textbox()
                gr.Button(fn.__name__).click(fn, box_in, box_out, api_name=fn.__name__)
    return demo
