"""Pictures of the app, made from the app itself: tiny random-weight models built as the tests build
them, the tests' scripted LLM on 127.0.0.1 and Debian's Chromium. Offline; run it again when the
page changes:

    python tools/screenshot.py [OUT_DIR] [--readme]

At 1280x900 and 390x844 each, into OUT_DIR (default .tmp/shots): the first screen
(first_screen_WxH.png), a finished run (run_WxH.png), a version comparison after a retry with the
earlier version opened (version_WxH.png), and Settings after an app restart
(settings_after_restart_WxH.png). `--readme` also refreshes docs/assets/screenshot.png, the README's
picture (the finished run at 1280x900).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.update(HF_HUB_OFFLINE="1", HF_HUB_DISABLE_PROGRESS_BARS="1", TRANSFORMERS_VERBOSITY="error")
os.environ.setdefault("GRADIO_TEMP_DIR", str(ROOT / ".tmp" / "gradio"))

REQUEST = "Describe this picture, draw what you see and read the description aloud."
SIZES = [(1280, 900), (390, 844)]
README_PICTURE = ROOT / "docs" / "assets" / "screenshot.png"
# The settings a visitor chose before the restart: the picture after it shows them kept.
CHOSEN = {"Candidate models per task (top-K)": "3", "Largest model (GB, 0: no limit)": "2"}
VERSION_MEDIA = """() => [...document.querySelectorAll('#chat .title')]
  .find(e => e.innerText.includes('Version 1'))?.closest('.thought-group')
  ?.querySelector('audio, .minimal-audio-player')"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", nargs="?", default=str(ROOT / ".tmp" / "shots"), help="the folder for the PNGs")
    p.add_argument("--readme", action="store_true", help=f"also refresh {README_PICTURE.relative_to(ROOT)}")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (ROOT / ".tmp").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / ".tmp") as tmp:
        written = shoot(Path(tmp), out)
    if args.readme:
        shutil.copyfile(out / "run_1280x900.png", README_PICTURE)
        written.append(README_PICTURE)
    print("\n".join(f"wrote {path}" for path in written))
    return 0


def tiny_catalog(tmp: Path) -> Any:
    from tiny_text_audio import vits
    from tiny_vision import build_blip_captioner, build_sd

    from hugginggpt.catalog import Catalog, ModelCard

    (tmp / "voice").mkdir()
    vits(tmp / "voice")
    blip, sd = build_blip_captioner(tmp / "blip"), build_sd(tmp / "sd")
    return Catalog(
        [
            ModelCard(id="tiny/blip", task="image-to-text", path=str(blip), local=True),
            ModelCard(id="tiny/stable-diffusion", task="text-to-image", path=str(sd), local=True),
            ModelCard(id="tiny/vits", task="text-to-speech", path=str(tmp / "voice"), local=True),
        ]
    )


def shoot(tmp: Path, out: Path) -> list[Path]:
    """Every picture, at every size; each size is its own browser (its own saved settings)."""
    from app_support import app_settings, responder, running_app
    from fakes.llm_server import FakeLLMServer
    from playwright.sync_api import sync_playwright
    from test_browser import chromium

    catalog, port, written = tiny_catalog(tmp), free_port(), []
    with FakeLLMServer() as llm, sync_playwright() as playwright, chromium(playwright) as browser:
        llm.responder = responder
        settings = app_settings(llm, tmp / "ws")
        visitors = {
            size: browser.new_context(viewport={"width": size[0], "height": size[1]}) for size in SIZES
        }
        with running_app(settings, catalog=catalog, port=port) as demo:
            for (width, height), visitor in visitors.items():
                page = visitor.new_page()
                page.set_default_timeout(180_000)
                written += before_restart(page, demo.local_url, out, f"{width}x{height}")
                page.close()
        with running_app(settings, catalog=catalog, port=port) as demo:  # the app restarted
            for (width, height), visitor in visitors.items():
                page = visitor.new_page()
                page.set_default_timeout(180_000)
                written.append(settings_after_restart(page, demo.local_url, out, f"{width}x{height}"))
                visitor.close()
    return written


def before_restart(page: Any, url: str, out: Path, size: str) -> list[Path]:
    """The first screen, a finished run and its version comparison; Settings chosen meanwhile."""
    from test_browser import close_sidebar, open_settings

    page.goto(url)
    page.locator("#status").get_by_text("LLM:").wait_for()
    page.wait_for_timeout(800)  # the sidebar has slid in (a wide screen) and the cards are drawn
    shots = [snap(page, out / f"first_screen_{size}.png")]
    open_settings(page)
    for label, value in CHOSEN.items():
        page.get_by_label(label).fill(value)
        page.get_by_label(label).blur()
    page.wait_for_timeout(500)  # the browser's store takes the last change
    page.locator("#settings").get_by_text("Settings", exact=True).click()  # folded: the list in view
    if page.viewport_size["width"] < 769:
        close_sidebar(page)  # on a phone it covers the chat
    page.locator("#request input[type=file]").set_input_files(str(ROOT / "assets" / "street.png"))
    page.locator("#request img").first.wait_for()
    page.locator("#request textarea").fill(REQUEST)
    page.locator("#request textarea").press("Enter")
    chat = page.locator("#chat")
    chat.get_by_text("Answer for you").wait_for()
    page.locator("#stop").wait_for(state="hidden")
    chat.locator("audio, .minimal-audio-player").first.wait_for()  # the models' image and voice
    page.wait_for_timeout(500)  # the chat's scroll to its end settles
    shots.append(snap(page, out / f"run_{size}.png"))
    chat.get_by_role("button", name="Retry", exact=True).click()
    version = chat.locator(".title").filter(has_text="Version 1")
    version.wait_for()
    page.locator("#stop").wait_for(state="hidden")
    version.click()  # the earlier version opened, its media beside the new answer's
    page.wait_for_function(f"() => !!({VERSION_MEDIA})()")
    page.evaluate(f"() => ({VERSION_MEDIA})().scrollIntoView({{block: 'center'}})")
    page.wait_for_timeout(500)
    shots.append(snap(page, out / f"version_{size}.png"))
    return shots


def settings_after_restart(page: Any, url: str, out: Path, size: str) -> Path:
    from test_browser import open_settings

    page.goto(url)
    page.locator("#status").get_by_text("LLM:").wait_for()
    open_settings(page)
    page.get_by_label("Largest model (GB, 0: no limit)").scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    return snap(page, out / f"settings_after_restart_{size}.png")


def snap(page: Any, path: Path) -> Path:
    page.screenshot(path=str(path))
    return path


def free_port() -> int:
    """The same port before and after the restart: the browser keeps its settings per origin."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
