"""Estimates and limits in the page, in a real headless Chromium: with a model size limit, the
review form shows each task's estimate and the candidate the limit left out, and nothing runs."""

import pytest
from app_support import app_settings, fake_catalog, photo, running_app
from fakes.endpoints import SizedEndpoint
from test_browser import _browser_or_skip, chromium, open_app

GB = 10**9


@pytest.mark.browser
def test_browser_review_form_shows_estimates_and_what_a_limit_left_out(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    sizes = {
        "org/captioner-a": (3 * GB, 3 * GB),
        "org/captioner-b": (GB // 5, 0),
        "org/painter": (GB // 2, 0),
    }
    endpoint = SizedEndpoint(sizes=sizes)
    settings = app_settings(llm_server, tmp_path / "ws", max_model_gb=1.0)
    with (
        running_app(settings, catalog=fake_catalog(), endpoint=endpoint) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        page = open_app(browser, demo.local_url, height=1600)
        page.locator("#review-toggle input[type=checkbox]").check()
        page.locator("#request input[type=file]").set_input_files(str(photo(tmp_path / "street.png")))
        page.locator("#request img").first.wait_for()
        box = page.locator("#request textarea")
        box.fill("[conv-estimate] caption this, draw it and read it aloud")
        box.press("Enter")

        page.locator("#review-form").first.wait_for()  # planned and selected; nothing ran
        estimate = page.locator("#review-estimate-0")
        estimate.get_by_text("Estimate: download 0 B, memory 200 MB").wait_for()
        assert "Left out by your limits: org/captioner-a: it is 3 GB, over the 1 GB model limit" in (
            estimate.inner_text()
        )
        assert "memory 500 MB" in page.locator("#review-estimate-1").inner_text()
        # the chat's plan list says it too
        chat = page.locator("#chat")
        chat.get_by_text("Plan ready for review").first.click()  # open the work box, then the plan's
        chat.get_by_text("Plan: 3 tasks").first.click()
        chat.get_by_text("200 MB in memory").first.wait_for()
        assert endpoint.calls == []


@pytest.mark.browser
def test_browser_settings_panel_limit_refuses_a_request_no_model_fits(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    endpoint = SizedEndpoint(sizes={"org/captioner-a": (3 * GB, 0), "org/captioner-b": (2 * GB, 0)})
    with (
        running_app(
            app_settings(llm_server, tmp_path / "ws"), catalog=fake_catalog(), endpoint=endpoint
        ) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        page = open_app(browser, demo.local_url, height=1600)
        page.locator("#settings").get_by_text("Settings").first.click()
        limit = page.locator("#max-model-gb input")
        limit.fill("1")
        limit.press("Tab")  # a change event
        page.locator("#request input[type=file]").set_input_files(str(photo(tmp_path / "street.png")))
        page.locator("#request img").first.wait_for()
        box = page.locator("#request textarea")
        box.fill("[conv-limit] caption this, draw it and read it aloud")
        box.press("Enter")
        page.locator("#chat").get_by_text(
            "the smallest candidate is 2 GB; the limit is 1 GB"
        ).first.wait_for()
        assert endpoint.calls == []
