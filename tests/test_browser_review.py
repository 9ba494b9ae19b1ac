"""The plan under the person's control, in a real headless Chromium: turn on review, edit a task's
argument in the form (a bad field first: its problem shows beside it and nothing runs), run the
plan, then give its image a new seed from the option under the answer."""

import time

import pytest
from app_support import app_settings, fake_catalog, photo, running_app
from fakes.endpoints import FakeEndpoint
from test_browser import SCREENSHOTS, _browser_or_skip, chromium, open_app

CATALOG = fake_catalog()


def field(page, elem_id: str):
    return page.locator(f"#{elem_id}").locator("textarea, input").first


@pytest.mark.browser
def test_browser_review_edit_an_argument_run_the_plan_and_regenerate_its_image(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    endpoint = FakeEndpoint(duration=0.1)
    settings = app_settings(llm_server, tmp_path / "ws")
    with (
        running_app(settings, catalog=CATALOG, endpoint=endpoint) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        page = open_app(browser, demo.local_url, height=1600)
        assert page.locator("#review-form").count() == 0
        page.locator("#review-toggle input[type=checkbox]").check()

        page.locator("#request input[type=file]").set_input_files(str(photo(tmp_path / "street.png")))
        page.locator("#request img").first.wait_for()
        box = page.locator("#request textarea")
        box.fill("[conv-review] caption this, draw it and read it aloud")
        box.press("Enter")

        chat = page.locator("#chat")
        form = page.locator("#review-form").first  # Gradio puts a group's id on two nested divs
        form.wait_for()  # planned and selected; nothing ran
        chat.get_by_text("Review the plan").first.wait_for()
        assert endpoint.calls == []
        assert page.locator("#review-task-1").inner_text() == "Task 1 · text-to-image"
        assert field(page, "review-arg-1-text").input_value() == "output of task 0"  # the chat's words
        assert field(page, "review-model-0").input_value() == "org/captioner-a"

        # a dependency that is not a task number: the problem shows beside task 2, nothing runs
        field(page, "review-arg-1-text").fill("a red boat at sea")
        field(page, "review-dep-2").fill("zero")
        page.locator("#review-run").click()
        problem = page.locator("#review-problems-2")
        problem.get_by_text("dependencies are task numbers").wait_for()
        assert field(page, "review-arg-1-text").input_value() == "a red boat at sea"  # kept as typed
        assert endpoint.calls == [] and chat.get_by_text("Answer for conv-review").count() == 0
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "review_form.png"), full_page=True)

        field(page, "review-dep-2").fill("0")
        page.locator("#review-run").click()
        chat.get_by_text("Answer for conv-review").wait_for()
        form.wait_for(state="hidden")
        chat.get_by_text("▶ Run the plan (task 1: arguments changed)").wait_for()
        drawn = [c for c in endpoint.calls if c[0] == "text-to-image"]
        assert len(endpoint.calls) == 3 and drawn[0][2]["text"] == "a red boat at sea"

        # the generated image gets a new seed on a click: only that task runs again, in place
        seeds = chat.get_by_role("button", name="↻ New seed ▾ (2 outputs)")  # the new seeds: one menu
        seeds.click()
        new_image = chat.get_by_role("button", name="↻ New image for task 1")
        new_image.click()
        chat.get_by_text("Version 1 · replaced: a new seed for task 1").wait_for()
        deadline = time.time() + 30
        while len(endpoint.calls) < 4 or page.locator("#stop").is_visible():
            assert time.time() < deadline, "the image was not drawn again"
            time.sleep(0.1)
        assert [c[0] for c in endpoint.calls[3:]] == ["text-to-image"]
        # the voice came from the result cache, and says so under its clip
        chat.get_by_text("Task 2 · text-to-speech · org/speaker · from the cache").wait_for()
        seeds.click()  # offered again for the new image
        new_image.wait_for()
        chat.get_by_role("button", name="✎ Edit the plan").wait_for()  # and the plan, to edit
        page.screenshot(path=str(SCREENSHOTS / "review_after_regenerate.png"), full_page=True)

        # the plan opened for editing and cancelled: the form goes, nothing runs, the answer stays
        chat.get_by_role("button", name="✎ Edit the plan").click()
        form.wait_for()
        page.locator("#review-cancel").click()
        form.wait_for(state="hidden")
        page.locator("#stop").wait_for(state="hidden")
        assert len(endpoint.calls) == 4
        assert chat.get_by_text("The plan was cancelled").count() == 0  # the last run's plan, unedited

        page.reload()  # the toggle is kept in this browser, like the other settings
        chat.get_by_text("Version 1 · replaced: a new seed for task 1").wait_for()
        seeds.wait_for()  # the menu folded again, as a new page shows it
        assert page.locator("#review-toggle input[type=checkbox]").is_checked()
