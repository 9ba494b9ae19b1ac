"""A request keeps running when its tab is reloaded or closed (issue 20), in a real headless
Chromium: after a reload the page follows the run (Stop shown, the message box locked) until its
answer, so does a second tab, and a page opened after the tab was closed finds the finished
answer; nothing was sent again meanwhile."""

import time

import pytest
from app_support import app_settings, fake_catalog, photo, running_app
from test_browser import _browser_or_skip, chromium
from test_live_runs import GatedEndpoint

CATALOG = fake_catalog()


def ask(page, text: str, picture) -> None:
    page.locator("#request input[type=file]").set_input_files(str(picture))
    page.locator("#request img").first.wait_for()
    page.locator("#request textarea").fill(text)
    page.locator("#request textarea").press("Enter")


def new_page(context, url: str):
    page = context.new_page()
    page.goto(url)
    page.locator("#status").get_by_text("LLM:").wait_for()
    return page


def wait_until(condition, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def plans_of(server, tag: str) -> int:
    """How many plans the LLM was asked for that name `tag`: a request sent again would add one."""
    return sum(r["stage"] == "plan" and tag in str(r["messages"][-1]) for r in server.requests)


@pytest.mark.browser
def test_a_run_goes_on_across_a_reload_and_a_closed_tab(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    endpoint = GatedEndpoint(duration=0.2)
    settings = app_settings(llm_server, tmp_path / "ws")
    with (
        running_app(settings, catalog=CATALOG, endpoint=endpoint) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        context = browser.new_context(viewport={"width": 1280, "height": 900})  # one browser's store
        context.set_default_timeout(20_000)
        page = new_page(context, demo.local_url)
        ask(page, "[conv-reloaded] caption this", photo(tmp_path / "a.png"))
        page.locator("#stop").wait_for()
        wait_until(endpoint.waiting.is_set)  # a model is running
        sent = plans_of(llm_server, "conv-reloaded")

        page.reload()  # mid-run: the page follows the run where it is
        page.locator("#status").get_by_text("LLM:").wait_for()
        page.locator("#stop").wait_for()
        assert page.locator("#request textarea").is_disabled()
        chat = page.locator("#chat")
        assert chat.get_by_text("Answer for conv-reloaded").count() == 0  # still running
        other = new_page(context, demo.local_url)  # a second tab follows it too
        other.locator("#stop").wait_for()
        endpoint.gate.set()  # the captioner may finish now
        chat.get_by_text("Answer for conv-reloaded").wait_for()
        other.locator("#chat").get_by_text("Answer for conv-reloaded").wait_for()
        other.close()
        page.locator("#stop").wait_for(state="hidden")
        page.wait_for_function("() => !document.querySelector('#request textarea').disabled")
        assert chat.get_by_text("Stopped.").count() == 0
        assert plans_of(llm_server, "conv-reloaded") == sent  # nothing was sent again

        endpoint.calls.clear()
        endpoint.gate.clear()
        endpoint.waiting.clear()
        ask(
            page, "[conv-closed] caption this", photo(tmp_path / "b.png", (56, 40))
        )  # another: not from the cache
        wait_until(endpoint.waiting.is_set)
        page.close()  # the tab is closed mid-run
        conv = next(c for c in demo.chat_app.conversations.values() if "conv-closed" in str(c.display))
        time.sleep(0.5)  # the page's unload has reached the app
        assert conv.cancel is not None and not conv.cancel.is_set()
        endpoint.gate.set()
        wait_until(lambda: conv.cancel is None)  # the run goes on without a page, to its end
        assert len(endpoint.calls) == 3  # every task ran

        page = new_page(context, demo.local_url)  # later, a new tab of the same browser
        page.locator("#chat").get_by_text("Answer for conv-closed").wait_for()
        assert page.locator("#chat").get_by_text("Stopped.").count() == 0
        assert page.locator("#stop").is_hidden()
