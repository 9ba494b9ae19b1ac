"""A normal use of the app leaves the browser's console clean (issue 20): several requests in a row
in one conversation, a reload in the middle of a run and after it, switching conversations, with
the tasks started while the plan streams in and without, on a desktop and a phone screen."""

import re
import time

import pytest
from app_support import app_settings, photo, running_app
from test_browser import _browser_or_skip, chromium, new_conversation, pick

TORN_DOWN = r"^(AbortError: signal is aborted without reason|Unexpected error Connection errored out)"
MERMAID_DELAY = 3.0  # seconds
SIZES = {"desktop": (1280, 900), "phone": (390, 844)}


def send(page, text: str, folder) -> None:
    """A request with a photo of its own (the file input ignores the same file twice in a row)."""
    picture = photo(folder / f"photo-{len(list(folder.glob('photo-*')))}.png", (64, 48))
    page.locator("#request input[type=file]").set_input_files(str(picture))
    page.locator("#request img").first.wait_for()
    page.locator("#request textarea").fill(text)
    page.locator("#request textarea").press("Enter")


def answered(page, tag: str) -> None:
    page.locator("#chat").get_by_text(f"Answer for {tag}").wait_for()
    page.locator("#stop").wait_for(state="hidden")  # the run has ended


def until_no_run_goes(demo, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while any(c.cancel is not None for c in demo.chat_app.conversations.values()):
        assert time.monotonic() < deadline, "a run is still going"
        time.sleep(0.1)


def slow(route) -> None:
    time.sleep(MERMAID_DELAY)  # the browser goes on meanwhile; only this file waits
    route.continue_()


@pytest.mark.browser
@pytest.mark.parametrize(
    ("size", "streaming"), [("desktop", True), ("phone", False)], ids=["desktop-streaming", "phone-in-stages"]
)
def test_a_normal_use_leaves_no_error_in_the_console(llm_server, tiny_catalog, tmp_path, size, streaming):
    sync_playwright = _browser_or_skip()
    settings = app_settings(llm_server, tmp_path / "ws", stream_execution=streaming)
    errors: list[str] = []
    width, height = SIZES[size]
    with sync_playwright() as p, chromium(p) as browser, running_app(settings, catalog=tiny_catalog) as demo:
        page = browser.new_page(viewport={"width": width, "height": height})
        page.set_default_timeout(30_000)
        leaving = [False]  # while a reload tears the page down

        def logged(text: str) -> None:
            # The page a reload tears down logs the stream it was reading as broken: it is gone.
            if not (leaving[0] and re.search(TORN_DOWN, text)):
                errors.append(text)

        def reload() -> None:
            leaving[0] = True
            page.reload()
            page.locator("#status").get_by_text("LLM:").wait_for()  # the new page is there
            leaving[0] = False

        page.on("console", lambda m: logged(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: logged(f"{e}\n{e.stack}"))
        # Mermaid's script arrives late, as over a slow network or on a busy machine: the first
        # plan graph is still being drawn when the run ends and the chat replaces it.
        page.route("**/mermaid.core-*.js", slow)
        page.goto(demo.local_url)
        page.locator("#status").get_by_text("LLM:").wait_for()
        chat = page.locator("#chat")

        # Requests in a row in one conversation, each with a plan graph.
        for n in range(3):
            send(page, f"[conv-a{n}] caption this photo, draw it and read it aloud", tmp_path)
            answered(page, f"conv-a{n}")
        # A reload while a run goes, and once it is over.
        send(page, "[conv-b] caption this photo again", tmp_path)
        chat.get_by_text(re.compile(r"^Plan: \d tasks")).first.wait_for()
        reload()
        chat.get_by_text("Answer for conv-a2").wait_for()
        until_no_run_goes(demo)
        reload()  # the page may still hold the stream that followed the run: it is torn down too
        chat.get_by_text("Answer for conv-a2").wait_for()
        # A second conversation; back to the first while its run goes, and again once it is done.
        new_conversation(page)
        chat.get_by_text("Answer for conv-a0").wait_for(state="detached")
        send(page, "[conv-c] caption this one", tmp_path)
        chat.get_by_text(re.compile(r"^Plan: \d tasks")).first.wait_for()
        pick(page, re.compile(r"^\[conv-a0\]"))
        chat.get_by_text("Answer for conv-a2").wait_for()
        new_conversation(page)
        send(page, "[conv-d] caption this one", tmp_path)
        answered(page, "conv-d")
        pick(page, re.compile(r"^\[conv-a0\]"))
        chat.get_by_text("Answer for conv-a2").wait_for()
        page.wait_for_timeout(1500)  # any late script error has its time to show
    assert not errors, errors
