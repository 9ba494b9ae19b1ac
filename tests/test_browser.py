"""The app in a real headless Chromium (Debian's /usr/bin/chromium through Playwright; never a
browser download): upload an image, send a request, watch every stage stream in.

Skips when Chromium or Playwright is missing, unless HUGGINGGPT_REQUIRE_BROWSER=1 (CI), then fails.
"""

import contextlib
import os
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from app_support import app_settings, photo, running_app

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parent.parent / ".tmp" / "screenshots"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def _browser_or_skip():
    required = os.environ.get("HUGGINGGPT_REQUIRE_BROWSER") == "1"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if required:
            pytest.fail("HUGGINGGPT_REQUIRE_BROWSER=1 but the playwright package is not installed")
        pytest.skip("playwright is not installed")
    if not CHROMIUM.exists():
        if required:
            pytest.fail(f"HUGGINGGPT_REQUIRE_BROWSER=1 but {CHROMIUM} is missing (apt-get install chromium)")
        pytest.skip(f"{CHROMIUM} is missing")
    return sync_playwright


@contextlib.contextmanager
def beacon():
    """An HTTP server that records every request: an image the page must never load."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.browser
def test_browser_streams_plan_models_media_and_answer(llm_server, tiny_catalog, tmp_path):
    sync_playwright = _browser_or_skip()
    picture = photo(tmp_path / "street.png", (64, 48))
    with (
        running_app(app_settings(llm_server, tmp_path / "ws"), catalog=tiny_catalog) as demo,
        sync_playwright() as p,
        beacon() as (tracker, hits),
    ):
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 1500})
            page.set_default_timeout(30_000)
            page.goto(demo.local_url)
            page.locator("#status").get_by_text("LLM:").wait_for()  # the status line names the LLM
            assert "fake-controller at http://127.0.0.1" in page.locator("#status").inner_text()

            page.locator("#request input[type=file]").set_input_files(str(picture))
            page.locator("#request img").first.wait_for()  # the upload finished: its thumbnail is shown
            box = page.locator("#request textarea")
            # the request carries a markdown image on another origin, and the fake LLM echoes it
            box.fill(
                "[conv-browser] caption this photo, draw the caption and read it aloud "
                f"![t]({tracker}/t.png?q=secret)"
            )
            sent = time.perf_counter()
            box.press("Enter")

            chat = page.locator("#chat")
            chat.get_by_text("Plan: 3 tasks").wait_for()
            plan_seconds = time.perf_counter() - sent
            chat.get_by_text("Answer for conv-browser").wait_for()
            chat.get_by_text("Task 2 · text-to-speech · tiny/vits · done").wait_for()

            # the LLM's markdown image became an <img>, and the page's Content-Security-Policy kept the
            # browser from loading it: no request reached the other origin
            injected = chat.locator(f"img[src^='{tracker}']")
            injected.nth(1).wait_for(
                state="attached"
            )  # in the request, and at the end of the streamed answer
            settled = (
                "img => img.complete ? img.naturalWidth : new Promise(done => ['load', 'error'].forEach("
                "e => img.addEventListener(e, () => done(img.naturalWidth))))"
            )
            assert injected.last.evaluate(settled) == 0  # the browser settled it: blocked, nothing drawn
            assert hits == [], hits

            # the generated image: an <img> served by Gradio, other than the uploaded photo
            images = chat.locator("img[src*='/gradio_api/file=']")
            sources = [images.nth(i).get_attribute("src") for i in range(images.count())]
            made = [s for s in sources if not s.endswith("street.png")]
            assert made and any(s.endswith(".png") for s in made), sources
            generated = chat.locator(f"img[src='{made[0]}']")
            assert generated.evaluate("img => img.complete && img.naturalWidth > 0")
            audio = chat.locator("audio")
            audio.first.wait_for(state="attached")
            assert audio.first.get_attribute("src")  # Gradio's player loads the served file into a blob
            wav = chat.locator("a[href*='/gradio_api/file='][href$='.wav']").first.get_attribute("href")
            assert page.request.get(wav).body()[:4] == b"RIFF"  # the generated clip, as the page links it

            shots = [tmp_path / "app_browser.png", tmp_path / "app_browser_plan.png"]
            page.screenshot(path=str(shots[0]), full_page=True)

            # closed boxes open on a click: the readable plan, and the model choice with its Hub link
            chat.get_by_text("Plan: 3 tasks").click()
            chat.get_by_text("after task 0").first.wait_for()
            chat.get_by_text("Task 0 · image-to-text · tiny/blip-base · done").click()
            link = chat.locator("a[href='https://huggingface.co/tiny/blip-base']")
            link.first.wait_for()
            chat.get_by_text("tiny/blip-base is small and runs locally").wait_for()
            chat.get_by_text("Plan: 3 tasks").scroll_into_view_if_needed()
            page.screenshot(path=str(shots[1]), full_page=True)

            # the settings panel changes this session's status line
            page.locator("#settings").get_by_text("Settings", exact=True).click()
            page.get_by_label("hybrid").check()
            page.locator("#status").get_by_text("hybrid:").wait_for()
            assert "top-K 5" in page.locator("#status").inner_text()

            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            for shot in shots:
                shutil.copy(shot, SCREENSHOTS / shot.name)
            # leaving the page ends the conversation: it is forgotten and its files deleted
            [conv] = demo.chat_app.conversations.values()
            page.close()
            deadline = time.time() + 15
            while demo.chat_app.conversations and time.time() < deadline:
                time.sleep(0.1)
            assert not demo.chat_app.conversations and not conv.workspace.root.exists()
            print(
                f"\nbrowser: plan shown {plan_seconds:.2f} s after pressing Enter; "
                f"screenshots in {SCREENSHOTS}"
            )
        except Exception:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # what the page showed when it failed
            with contextlib.suppress(Exception):  # the page may be closed already
                page.screenshot(path=str(SCREENSHOTS / "app_browser_failure.png"), full_page=True)
            for conv in demo.chat_app.conversations.values():  # what each task did, as the trace has it
                for trace in conv.traces:
                    print("trace at failure:", Path(trace).read_text()[-4000:])
            raise
        finally:
            browser.close()
