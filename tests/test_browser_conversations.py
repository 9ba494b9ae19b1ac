"""Conversations that last (issue 20), in a real headless Chromium: the tab is closed and the app
restarted between two page loads, and the conversation, its media and the Settings come back; the
conversation picked last is the one a reload opens; deleting makes its files unreachable at once,
and "Undo delete" brings it back. The list is in the sidebar (tests/test_browser_sidebar.py)."""

import re
import socket

import pytest
from app_support import app_settings, fake_catalog, photo, running_app
from test_browser import (
    SCREENSHOTS,
    _browser_or_skip,
    chromium,
    delete_conversation,
    new_conversation,
    open_app,
    open_sidebar,
    pick,
)

STORED = "() => localStorage.getItem('hugginggpt')"  # this browser's store (webui.page.saved), encrypted
SERVED = "#chat img[src*='/gradio_api/file=']"  # the photo and the drawing


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def served_urls(page, base: str) -> set[str]:
    found = page.eval_on_selector_all(SERVED, "els => els.map(e => e.getAttribute('src'))")
    return {base.rstrip("/") + u if u.startswith("/") else u for u in found}


@pytest.mark.browser
def test_a_conversation_its_media_and_settings_come_back_after_a_restart(llm_server, tiny_catalog, tmp_path):
    sync_playwright = _browser_or_skip()
    picture = photo(tmp_path / "street.png", (64, 48))
    settings = app_settings(llm_server, tmp_path / "ws")
    port = free_port()  # the same origin before and after: the browser's store is per origin
    errors: list[str] = []
    with sync_playwright() as p, chromium(p) as browser:
        visitor = browser.new_context(viewport={"width": 1280, "height": 900})
        visitor.set_default_timeout(30_000)

        def watch(page):
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            return page

        with running_app(settings, catalog=tiny_catalog, port=port) as demo:
            page = watch(visitor.new_page())
            page.goto(demo.local_url)
            page.locator("#status").get_by_text("LLM:").wait_for()
            page.locator("#settings").get_by_text("Settings", exact=True).click()
            page.get_by_label("hybrid").check()
            page.locator("#status").get_by_text("models run here first, then on Hugging Face").wait_for()
            page.locator("#request input[type=file]").set_input_files(str(picture))
            page.locator("#request img").first.wait_for()
            page.locator("#request textarea").fill("[conv-lasting] caption this photo and read it aloud")
            page.locator("#request textarea").press("Enter")
            chat = page.locator("#chat")
            chat.get_by_text("Answer for conv-lasting").wait_for()
            chat.locator("audio").first.wait_for(state="attached")
            # the files the answer names are links to the conversation's served copies
            named = chat.locator("a[href*='gradio_api/file=']", has_text="outputs/")
            named.nth(1).wait_for()
            links = named.evaluate_all("els => els.map(e => e.href)")
            assert len(links) == 2 and all(page.request.get(u).status == 200 for u in links), links
            page.close()  # the tab is closed as soon as the answer is there...
        # ...and the app restarted: a new process would read the same work folder
        with running_app(settings, catalog=tiny_catalog, port=port) as demo:
            assert not demo.chat_app.conversations  # nothing in memory: all of it comes from disk
            page = watch(visitor.new_page())
            page.goto(demo.local_url)
            chat = page.locator("#chat")
            chat.get_by_text("Answer for conv-lasting").wait_for()
            chat.locator("audio").first.wait_for(state="attached")
            shown_photo = chat.locator(".user-row img[src*='/gradio_api/file=']")
            shown_photo.first.wait_for()  # a message of its own, drawn as it loads
            assert shown_photo.count() == 1
            urls = served_urls(page, demo.local_url)
            assert len(urls) == 2 and all(page.request.get(u).status == 200 for u in urls), urls
            page.locator("#settings").get_by_text("Settings", exact=True).click()
            assert page.get_by_label("hybrid").is_checked()
            # the plan was saved with it: "Edit the plan" under the answer still opens its form
            chat.get_by_role("button", name="✎ Edit the plan").click()
            page.locator("#review-form").first.wait_for()
            page.locator("#review-cancel").click()
            page.locator("#review-form").first.wait_for(state="detached")
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "after_restart.png"), full_page=True)
            open_sidebar(page)  # listed under its first request's words (a private app)
            page.locator("#earlier").get_by_role(
                "radio", name=re.compile(r"^\[conv-lasting\] caption this photo")
            ).wait_for()

            # A second conversation; then the first picked again: a reload opens the one picked.
            new_conversation(page)
            chat.get_by_text("Answer for conv-lasting").wait_for(state="detached")
            page.locator("#request textarea").fill("[conv-second] say hello")
            page.locator("#request textarea").press("Enter")
            chat.get_by_text("Answer for conv-second").wait_for()
            page.locator("#stop").wait_for(state="hidden")  # the run has ended
            stored = page.evaluate(STORED)
            pick(page, re.compile(r"^\[conv-lasting\]"))
            chat.get_by_text("Answer for conv-lasting").wait_for()
            page.wait_for_function(f"stored => ({STORED})() !== stored", arg=stored)  # the pick is kept
            page.reload()
            chat.get_by_text("Answer for conv-lasting").wait_for()
            assert chat.get_by_text("Answer for conv-second").count() == 0

            # Delete: its files are unreachable at once; the undo brings the conversation back.
            delete_conversation(page)
            chat.get_by_text("Answer for conv-lasting").wait_for(state="detached")
            page.locator("#undo-delete").wait_for()
            toast = page.locator(".toast-body").filter(has_text="Undo delete brings it back.")
            toast.get_by_text("Deleted “[conv-lasting]", exact=False).wait_for()  # said, not silent
            page.screenshot(path=str(SCREENSHOTS / "deleted_with_undo.png"))
            statuses = {u: page.request.get(u).status for u in urls}
            assert all(status in (403, 404) for status in statuses.values()), statuses
            page.locator("#undo-delete").click()
            chat.get_by_text("Answer for conv-lasting").wait_for()
            chat.locator("audio").first.wait_for(state="attached")
            assert all(page.request.get(u).status == 200 for u in served_urls(page, demo.local_url))
    assert not [e for e in errors if "localStorage" in e], errors


@pytest.mark.browser
def test_a_look_at_the_conversations_list_switches_nothing(llm_server, tmp_path):
    """Gradio's menu (the list before the sidebar) sent "input" whenever it lost focus, with the
    conversation it showed. Clicking "New conversation" right after looking at it sent both; a busy
    server that took the menu's last switched back to the old conversation, and the next request went
    into it. Only a pick may switch: clicking the conversation already open in the list sends none."""
    sync_playwright = _browser_or_skip()
    app = running_app(app_settings(llm_server, tmp_path / "ws"), catalog=fake_catalog())
    with sync_playwright() as p, chromium(p) as browser, app as demo:
        handler = {getattr(f.fn, "__name__", ""): i for i, f in demo.fns.items()}
        sent: list[int] = []

        def joined(request) -> None:
            if "/queue/join" in request.url:
                sent.append(request.post_data_json["fn_index"])

        page = open_app(browser, demo.local_url, height=900)
        page.on("request", joined)
        page.locator("#earlier").get_by_role("radio").first.click()  # the one open: no pick
        new = handler["on_new"]
        with page.expect_request(lambda r: "/queue/join" in r.url and r.post_data_json["fn_index"] == new):
            page.locator("#new-conversation").click()  # the list loses its focus on the way
        assert handler["on_pick"] not in sent, sent  # requests go out in order: the menu's came first
