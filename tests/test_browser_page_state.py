"""The page keeps the person's view honest (issue 20), in a real headless Chromium: what would do
nothing during a run cannot be clicked then (the trace upload is disabled, the options under the
last answer are not offered) and comes back after it."""

import contextlib

import pytest
from app_support import app_settings, fake_catalog, photo, responder, running_app
from fakes.endpoints import FakeEndpoint
from fakes.llm_server import Reply
from test_browser import _browser_or_skip, chromium, open_app

CATALOG = fake_catalog()
DISABLED = "id => document.querySelector('#' + id)?.disabled === true"
ENABLED = "id => document.querySelector('#' + id)?.disabled === false"


def ask(page, text: str) -> None:
    box = page.locator("#request textarea")
    box.fill(text)
    box.press("Enter")


@contextlib.contextmanager
def slow_plans(server, seconds: float):
    """Requests tagged [slow] are planned after `seconds`: a run long enough to look at."""

    def slow(stage, body):
        if stage == "plan" and "[slow]" in body["messages"][-1]["content"]:
            return Reply('{"tasks": []}', delay=seconds)
        return responder(stage, body)

    server.responder = slow
    try:
        yield
    finally:
        server.responder = responder


@pytest.mark.browser
def test_the_rerun_controls_are_off_while_a_run_goes(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    endpoint = FakeEndpoint(duration=0.05)
    with (
        running_app(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=endpoint) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
        slow_plans(llm_server, 3.0),
    ):
        page = open_app(browser, demo.local_url, height=1400)
        chat = page.locator("#chat")
        page.locator("#request input[type=file]").set_input_files(str(photo(tmp_path / "street.png")))
        page.locator("#request img").first.wait_for()
        ask(page, "[conv-one] caption this, draw it and read it aloud")
        chat.get_by_text("Answer for conv-one").wait_for()
        page.locator("#stop").wait_for(state="hidden")
        page.wait_for_function(ENABLED, arg="run-trace")
        options = chat.locator("button.option")
        chat.get_by_role("button", name="✎ Edit the plan").wait_for()

        ask(page, "[conv-two] [slow] say hello")
        page.locator("#stop").wait_for()
        page.wait_for_function(DISABLED, arg="run-trace")
        options.first.wait_for(state="detached")  # the last message is the running turn's: none
        assert chat.get_by_text("Answer for conv-two").count() == 0  # still running

        chat.get_by_text("Answer for conv-two").wait_for()
        page.wait_for_function(ENABLED, arg="run-trace")
        assert options.count() == 0  # that run had no plan: nothing to redraw or edit


@pytest.mark.browser
def test_one_settings_entry_point_whose_empty_fields_show_what_the_server_uses(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    with (
        running_app(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        page = open_app(browser, demo.local_url, height=900)
        page.locator("footer").get_by_text("API", exact=False).first.wait_for()  # the footer is there
        assert page.get_by_text("Settings", exact=True).count() == 1  # Gradio's footer link is not
        footer = " ".join(page.locator("footer").inner_text().split())
        assert footer == "Use via API or MCP · Built with Gradio", footer  # no dot left over at its end
        page.locator("#settings").get_by_text("Settings", exact=True).click()
        url, model = page.get_by_label("LLM base URL"), page.get_by_label("LLM model")
        assert url.input_value() == "" and model.input_value() == ""  # empty: the server's
        assert url.get_attribute("placeholder") == f"{llm_server.url} (the server's)"
        assert model.get_attribute("placeholder") == "fake-controller (the server's)"
        page.locator("#status").get_by_text(f"fake-controller at {llm_server.url}").wait_for()


OPEN = """() => [...document.querySelectorAll('#chat .thought-group > .title')].filter(t =>
  !/rotate\\(0/.test(t.querySelector('.arrow').style.transform)).map(t => t.innerText.trim())"""


def is_open(page, prefix: str) -> bool:
    return any(title.startswith(prefix) for title in page.evaluate(OPEN))


def wait_open(page, prefix: str) -> None:
    page.wait_for_function(f"() => ({OPEN})().some(t => t.startsWith({prefix!r}))")


@pytest.mark.browser
def test_the_boxes_the_person_opened_stay_open_across_a_reload(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    with (
        running_app(
            app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=FakeEndpoint()
        ) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        page = open_app(browser, demo.local_url, height=1400)
        chat = page.locator("#chat")
        page.locator("#request input[type=file]").set_input_files(str(photo(tmp_path / "street.png")))
        page.locator("#request img").first.wait_for()
        ask(page, "[conv-boxes] caption this, draw it and read it aloud")
        chat.get_by_text("Answer for conv-boxes").wait_for()
        page.locator("#stop").wait_for(state="hidden")
        work, plan = "3 tasks · 3 models", "Plan: 3 tasks"
        assert not is_open(page, work) and not is_open(page, plan)  # a finished run's boxes are folded
        chat.locator(".thought-group > .title", has_text=work).click()
        chat.locator(".thought-group > .title", has_text=plan).click()  # a box inside it
        wait_open(page, work)
        wait_open(page, plan)
        page.wait_for_timeout(300)  # the click is recorded just after Gradio's toggle

        page.reload()
        chat.get_by_text("Answer for conv-boxes").wait_for()
        wait_open(page, work)
        wait_open(page, plan)
        # folded again by the person: folded after the next reload too
        chat.locator(".thought-group > .title", has_text=plan).click()
        page.wait_for_timeout(300)
        page.reload()
        chat.get_by_text("Answer for conv-boxes").wait_for()
        wait_open(page, work)
        page.wait_for_timeout(500)
        assert not is_open(page, plan)
