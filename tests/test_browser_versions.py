"""An earlier version keeps its media (issue 34), in a real headless Chromium at 1280x900 and
390x844: after the retry icon the opened "Version 1" box shows the images and the audio of the
answer it replaced, not only their captions."""

import pytest
from app_support import app_settings, fake_catalog, photo, running_app
from fakes.endpoints import FakeEndpoint
from test_browser import SCREENSHOTS, _browser_or_skip, chromium

SIZES = [(1280, 900), (390, 844)]
# The images and the sounds shown inside the "Version 1" box (a served file; Gradio's audio player).
IN_VERSION_1 = """() => { const t = [...document.querySelectorAll('#chat .title')]
  .find(e => e.innerText.includes('Version 1')); const box = t?.closest('.thought-group');
  return box ? {images: box.querySelectorAll('img[src*="/gradio_api/file="]').length,
    sounds: box.querySelectorAll('audio, .minimal-audio-player').length} : null; }"""


@pytest.mark.browser
def test_an_opened_earlier_version_shows_its_images_and_audio(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    picture = photo(tmp_path / "street.png")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with (
        running_app(
            app_settings(llm_server, tmp_path / "ws"), catalog=fake_catalog(), endpoint=FakeEndpoint()
        ) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        for width, height in SIZES:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(30_000)
            page.goto(demo.local_url)
            page.locator("#status").get_by_text("LLM:").wait_for()
            chat = page.locator("#chat")
            page.locator("#request input[type=file]").set_input_files(str(picture))
            page.locator("#request img").first.wait_for()
            page.locator("#request textarea").fill("[conv-v] caption this, draw it and read it aloud")
            page.locator("#request textarea").press("Enter")
            chat.get_by_text("Answer for conv-v").wait_for()
            page.locator("#stop").wait_for(state="hidden")
            chat.get_by_role("button", name="Retry", exact=True).click()
            title = chat.locator(".title").filter(has_text="Version 1 · replaced")
            title.wait_for()
            page.locator("#stop").wait_for(state="hidden")
            title.click()  # open the earlier version
            page.wait_for_function(f"() => ({IN_VERSION_1})()?.sounds >= 1")
            shown = page.evaluate(IN_VERSION_1)
            assert shown["images"] >= 1 and shown["sounds"] >= 1, shown  # the drawing and the voice
            page.evaluate(  # the earlier version's media in view, for the screenshot
                """() => [...document.querySelectorAll('#chat .title')]
                  .find(e => e.innerText.includes('Version 1')).closest('.thought-group')
                  .querySelector('audio, .minimal-audio-player')
                  .scrollIntoView({block: 'center'})"""
            )
            page.screenshot(path=str(SCREENSHOTS / f"version_{width}x{height}.png"))
            page.close()
