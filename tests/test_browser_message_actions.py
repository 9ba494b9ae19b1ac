"""Regenerate and edit live on the message they belong to (issue 20), in a real headless Chromium:
the options under the last answer redraw one image or open its plan, the chat's retry icon
regenerates the turn and the pencil edits a request. Each does the turn again in place (the earlier
answer folds into a "Version N" box, no new turn), none can be clicked while a run goes, and all of it
is still there after a reload."""

import time

import pytest
from app_support import app_settings, fake_catalog, photo, running_app
from fakes.endpoints import FakeEndpoint
from test_browser import SCREENSHOTS, _browser_or_skip, chromium, open_app

CATALOG = fake_catalog()


def answers(chat, tag: str) -> int:
    return chat.get_by_text(f"Answer for {tag}").count()


def wait_until(check, what: str, seconds: float = 30) -> None:
    deadline = time.time() + seconds
    while not check():
        assert time.time() < deadline, what
        time.sleep(0.1)


@pytest.mark.browser
def test_the_actions_on_a_message_redo_its_turn_in_place(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    endpoint = FakeEndpoint(duration=0.6)  # a run long enough to look at the page during it
    with (
        running_app(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=endpoint) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        page = open_app(browser, demo.local_url, height=1600)
        chat = page.locator("#chat")
        users = chat.locator(".user-row")
        page.locator("#request input[type=file]").set_input_files(str(photo(tmp_path / "street.png")))
        page.locator("#request img").first.wait_for()
        box = page.locator("#request textarea")
        box.fill("[conv-act] caption this, draw it and read it aloud")
        box.press("Enter")
        page.locator("#stop").wait_for()
        # while it runs: no option to click, and Gradio keeps the retry icon and the pencil disabled
        assert chat.locator("button.option").count() == 0
        retry = chat.get_by_role("button", name="Retry", exact=True)
        pencil = chat.get_by_role("button", name="Edit", exact=True)
        assert retry.count() == 0 or retry.is_disabled()
        chat.get_by_text("Answer for conv-act").wait_for()
        page.locator("#stop").wait_for(state="hidden")
        seeds = chat.get_by_role("button", name="↻ New seed ▾ (2 outputs)")  # the new seeds: one menu
        seeds.wait_for()
        assert chat.locator("button.option").all_inner_texts() == [
            "↻ New seed ▾ (2 outputs)",
            "✎ Edit the plan",
        ]
        assert retry.is_enabled()
        seeds.click()
        new_image = chat.get_by_role("button", name="↻ New image for task 1")
        new_image.wait_for()
        assert chat.get_by_role("button", name="↻ New voice for task 2").count() == 1

        # a new seed for the image: only that task runs, in place of the old answer
        new_image.click()
        page.locator("#stop").wait_for()
        # gone while the image is redrawn, as Stop shows
        wait_until(
            lambda: chat.locator("button.option").count() == 0 or not page.locator("#stop").is_visible(),
            "the options go while the image is redrawn",
        )
        assert page.locator("#stop").is_visible(), "the run ended before its options went"
        page.locator("#stop").wait_for(state="hidden")
        chat.get_by_text("Version 1 · replaced: a new seed for task 1").wait_for()
        wait_until(lambda: answers(chat, "conv-act") == 1, "one answer shows (the old one is folded)")
        assert [c[0] for c in endpoint.calls[3:]] == ["text-to-image"]
        assert users.count() == 1  # the same turn, not a new one
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "message_actions_regenerated.png"), full_page=True)

        # the retry icon: every drawn task gets a new seed, the turn is done again in place
        retry.click()
        chat.get_by_text("Version 2 · replaced: new seeds").wait_for()
        page.locator("#stop").wait_for(state="hidden")
        assert sorted(c[0] for c in endpoint.calls[4:]) == ["text-to-image", "text-to-speech"]
        assert users.count() == 1

        # "Edit the plan": its form opens under the chat; the edited plan runs in place
        chat.get_by_role("button", name="✎ Edit the plan").click()
        page.locator("#review-form").first.wait_for()
        argument = page.locator("#review-arg-1-text").locator("textarea, input").first
        argument.fill("a lighthouse at dusk")
        page.locator("#review-run").click()
        chat.get_by_text("Version 3 · replaced: Run the plan again (task 1: arguments changed)").wait_for()
        page.locator("#stop").wait_for(state="hidden")
        assert (
            endpoint.calls[-1][0] == "text-to-image"
            and endpoint.calls[-1][2]["text"] == "a lighthouse at dusk"
        )
        assert users.count() == 1

        # the pencil edits a request of words only: Gradio's cannot send a bubble holding a file
        assert pencil.count() == 0
        box.fill("[conv-text] say hello")
        box.press("Enter")
        chat.get_by_text("Answer for conv-text").wait_for()
        page.locator("#stop").wait_for(state="hidden")
        chat.get_by_text("[conv-text] say hello").hover()
        pencil.click()
        editing = chat.locator("textarea").first
        editing.fill("[conv-edited] say hi")
        chat.get_by_role("button", name="Submit", exact=True).click()
        chat.get_by_text("Answer for conv-edited").wait_for()
        page.locator("#stop").wait_for(state="hidden")
        chat.get_by_text("Version 1 · replaced: your edit").wait_for()
        assert users.count() == 2 and chat.get_by_text("Answer for conv-text").count() == 0  # folded
        page.screenshot(path=str(SCREENSHOTS / "message_actions_edited.png"), full_page=True)

        page.reload()  # all of it is the conversation's, on the server
        chat.get_by_text("Answer for conv-edited").wait_for()
        for n in (1, 2, 3):
            chat.get_by_text(f"Version {n} ·").first.wait_for()
        retry.wait_for()  # a request without a plan: its retry sends it again; nothing else to offer
        assert chat.locator("button.option").count() == 0
