"""docs/assets/screenshot.png (the README's picture), made from the app itself: tiny random-weight
models built as the tests build them, the tests' scripted LLM on 127.0.0.1 and Debian's Chromium.
Offline; run it again when the page changes:

    python tools/screenshot.py [OUT.png] [--size 1280x900]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.update(HF_HUB_OFFLINE="1", HF_HUB_DISABLE_PROGRESS_BARS="1", TRANSFORMERS_VERBOSITY="error")
os.environ.setdefault("GRADIO_TEMP_DIR", str(ROOT / ".tmp" / "gradio"))

REQUEST = "Describe this picture, draw what you see and read the description aloud."


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", nargs="?", default=str(ROOT / "docs" / "assets" / "screenshot.png"))
    p.add_argument("--size", default="1280x900", help="the browser window, WIDTHxHEIGHT")
    args = p.parse_args(argv)
    width, height = (int(n) for n in args.size.split("x"))
    (ROOT / ".tmp").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / ".tmp") as tmp:
        shoot(Path(tmp), Path(args.out), width, height)
    print(f"wrote {args.out}")
    return 0


def shoot(tmp: Path, out: Path, width: int, height: int) -> None:
    from app_support import app_settings, responder, running_app
    from fakes.llm_server import FakeLLMServer
    from playwright.sync_api import sync_playwright
    from test_browser import chromium
    from tiny_text_audio import vits
    from tiny_vision import build_blip_captioner, build_sd

    from hugginggpt.catalog import Catalog, ModelCard

    (tmp / "voice").mkdir()
    vits(tmp / "voice")
    catalog = Catalog(
        [
            ModelCard(
                id="tiny/blip", task="image-to-text", path=str(build_blip_captioner(tmp / "blip")), local=True
            ),
            ModelCard(
                id="tiny/stable-diffusion", task="text-to-image", path=str(build_sd(tmp / "sd")), local=True
            ),
            ModelCard(id="tiny/vits", task="text-to-speech", path=str(tmp / "voice"), local=True),
        ]
    )
    with FakeLLMServer() as llm, running_app(app_settings(llm, tmp / "ws"), catalog=catalog) as demo:
        llm.responder = responder
        with sync_playwright() as playwright, chromium(playwright) as browser:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(120_000)
            page.goto(demo.local_url)
            page.locator("#status").get_by_text("LLM:").wait_for()
            page.locator("#request input[type=file]").set_input_files(str(ROOT / "assets" / "street.png"))
            page.locator("#request img").first.wait_for()
            page.locator("#request textarea").fill(REQUEST)
            page.locator("#request textarea").press("Enter")
            chat = page.locator("#chat")
            chat.get_by_text("Answer for you").wait_for()
            page.locator("#stop").wait_for(state="hidden")
            chat.locator("audio, .minimal-audio-player").first.wait_for()  # the models' image and voice
            page.wait_for_timeout(500)  # the chat's scroll to its end settles
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out))


if __name__ == "__main__":
    sys.exit(main())
