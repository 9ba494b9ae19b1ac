"""The first screen invites (issue 34), in a real headless Chromium at 1280x900 and 390x844: the
empty chat shows example requests as cards (with the bundled picture and recording), the status says
in plain words which LLM answers, where models run and how many there are; a card puts its request
and its file in the message box, and Enter runs it."""

import pytest
from app_support import app_settings, fake_catalog, running_app
from fakes.endpoints import FakeEndpoint
from test_browser import SCREENSHOTS, _browser_or_skip, chromium

SIZES = [(1280, 900), (390, 844)]


@pytest.mark.browser
def test_the_empty_chat_offers_example_cards_and_the_status_speaks_plainly(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    settings = app_settings(llm_server, tmp_path / "ws")
    with (
        running_app(settings, catalog=fake_catalog(), endpoint=FakeEndpoint()) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        for width, height in SIZES:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(30_000)
            page.goto(demo.local_url)
            status = page.locator("#status")
            status.get_by_text("Your LLM:").wait_for()
            line = " ".join(status.inner_text().split())
            assert line.startswith(
                f"Your LLM: fake-controller at {llm_server.url} · models run on fake · 4 models"
            )
            cards = page.locator("#chat .examples .example")
            cards.first.wait_for()
            assert cards.count() == 4
            assert "Describe this picture" in cards.first.inner_text()
            chat_box = page.locator("#chat").bounding_box()
            for n in range(4):  # every card in view on the first screen, inside the chat
                card = cards.nth(n).bounding_box()
                assert chat_box["y"] <= card["y"] and card["y"] + card["height"] <= min(
                    height, chat_box["y"] + chat_box["height"]
                ), (width, n, card)
            page.screenshot(path=str(SCREENSHOTS / f"first_screen_{width}x{height}.png"))
            cards.first.click()
            box = page.locator("#request textarea")
            page.wait_for_function(
                "() => document.querySelector('#request textarea').value.startsWith('Describe')"
            )
            page.locator("#request img").first.wait_for()  # the bundled picture, attached
            box.press("Enter")
            page.locator("#chat").get_by_text("Answer for you").wait_for()
            assert cards.count() == 0  # the cards give way to the conversation
            page.close()
