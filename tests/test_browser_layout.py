"""The first screen, in a real headless Chromium (issue 20): the message box is in view on first load
at three common sizes; a bad Settings value is explained under its field; a normal run shows no raw
Mermaid source and no script error; the plan graph is readable on a phone."""

import time

import pytest
from app_support import app_settings, photo, running_app
from test_browser import SCREENSHOTS, _browser_or_skip, chromium

SIZES = [(1280, 900), (1366, 768), (390, 844)]
RAW_MERMAID_SHOWN = """() => [...document.querySelectorAll('#chat .mermaid')].some(e =>
  !e.querySelector('svg') && getComputedStyle(e).visibility !== 'hidden' && e.textContent.includes('-->'))"""
# Mermaid draws its labels at 16 px in the diagram's own units; the svg is scaled to fit the bubble.
LABEL_PX = """() => { const svg = document.querySelector('#chat .mermaid svg');
  return svg.getBoundingClientRect().width / svg.viewBox.baseVal.width * 16; }"""


@pytest.mark.browser
def test_the_message_box_is_in_view_and_a_run_draws_cleanly_on_a_phone(llm_server, tiny_catalog, tmp_path):
    sync_playwright = _browser_or_skip()
    picture = photo(tmp_path / "street.png", (64, 48))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with (
        running_app(app_settings(llm_server, tmp_path / "ws"), catalog=tiny_catalog) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        for width, height in SIZES:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(30_000)
            errors: list[str] = []
            page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.goto(demo.local_url)
            page.locator("#status").get_by_text("LLM:").wait_for()
            box = page.locator("#request").bounding_box()  # the whole box, its border too
            assert box["y"] >= 0 and box["y"] + box["height"] <= height, (width, height, box)
            page.screenshot(path=str(SCREENSHOTS / f"first_{width}x{height}.png"))
            if width == 1280:  # a bad top-K is explained under its field, not by an "Error" pop-up
                page.locator("#settings").get_by_text("Settings", exact=True).click()
                top_k = page.get_by_label("Candidate models per task (top-K)")
                top_k.fill("99")
                top_k.blur()
                page.locator(".field-problem").get_by_text("a whole number from 1 to 10").wait_for()
                assert page.locator(".toast-body").count() == 0
                top_k.fill("3")
                top_k.blur()
                page.locator("#status").get_by_text("top-K 3").wait_for()
                assert not page.locator(".field-problem").get_by_text("a whole number").is_visible()
            if width == 390:  # a normal run on a phone
                page.locator("#request input[type=file]").set_input_files(str(picture))
                page.locator("#request img").first.wait_for()
                page.locator("#request textarea").fill("[conv-phone] caption this photo and read it aloud")
                page.locator("#request textarea").press("Enter")
                answered = page.locator("#chat").get_by_text("Answer for conv-phone")
                raw_seen = False
                while not answered.count():
                    raw_seen = raw_seen or page.evaluate(RAW_MERMAID_SHOWN)
                    time.sleep(0.03)
                assert not raw_seen
                page.locator("#stop").wait_for(state="hidden")
                page.locator("#chat").get_by_text("3 tasks ·").click()  # the work unfolds
                page.locator("#chat").get_by_text("Plan: 3 tasks").click()
                page.locator("#chat .mermaid svg .node").first.wait_for()
                assert page.evaluate(LABEL_PX) >= 11  # readable: not shrunk below 11 px
                page.locator("#chat .mermaid").scroll_into_view_if_needed()
                page.screenshot(path=str(SCREENSHOTS / f"plan_{width}x{height}.png"))
            assert errors == [], (width, errors)
            page.close()
