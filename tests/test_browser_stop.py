"""Stop stays in view while a run goes (issue 34), in a real headless Chromium at 1280x900 and
390x844: wherever the page is scrolled to (the chat, a review form below it), Stop is on screen, and it
stops the run."""

import pytest
from app_support import app_settings, fake_catalog, photo, running_app
from fakes.endpoints import FakeEndpoint
from test_browser import SCREENSHOTS, _browser_or_skip, chromium, close_sidebar, open_settings

SIZES = [(1280, 900), (390, 844)]
IN_VIEW = """() => { const r = document.querySelector('#stop').getBoundingClientRect();
  return r.width > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; }"""


@pytest.mark.browser
def test_stop_is_in_view_wherever_the_page_is_scrolled_while_a_run_goes(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    picture = photo(tmp_path / "street.png")
    endpoint = FakeEndpoint(duration=30)  # a run that goes until it is stopped
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with (
        running_app(
            app_settings(llm_server, tmp_path / "ws"), catalog=fake_catalog(), endpoint=endpoint
        ) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        for width, height in SIZES:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(30_000)
            page.goto(demo.local_url)
            page.locator("#status").get_by_text("LLM:").wait_for()
            open_settings(page)  # in the sidebar
            page.get_by_label("hybrid").check()  # a longer status line over the chat
            if width < 769:
                close_sidebar(page)  # on a phone it covers the page
            # A long page (a plan under review makes one; Settings did, before they moved to the sidebar).
            page.add_style_tag(content="#composer { padding-bottom: 1500px !important; }")
            page.locator("#request input[type=file]").set_input_files(str(picture))
            page.locator("#request img").first.wait_for()
            page.locator("#request textarea").fill(f"[conv-{width}] caption this, draw it and read it aloud")
            page.locator("#request textarea").press("Enter")
            page.locator("#stop").wait_for()
            page.locator("#chat").get_by_text("Task 0").first.wait_for()  # the run is under way
            for where in (
                "0",
                "document.documentElement.scrollHeight",
                "document.documentElement.scrollHeight / 2",
            ):
                page.evaluate(f"() => window.scrollTo(0, {where})")
                page.wait_for_timeout(200)  # a scroll is drawn on the next frame
                assert page.evaluate(IN_VIEW), (width, where, page.locator("#stop").bounding_box())
            assert page.evaluate("() => document.documentElement.scrollHeight") > height + 400  # it was long
            page.evaluate("() => window.scrollTo(0, 0)")
            page.screenshot(path=str(SCREENSHOTS / f"run_{width}x{height}.png"))
            page.locator("#stop").click()
            page.locator("#stop").wait_for(state="hidden")
            page.close()
