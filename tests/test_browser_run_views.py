"""Run views stay calm (issue 34), in a real headless Chromium at 1280x900 and 390x844: while a run
goes only the running task's box is open and a finished one is one folded line (a failed one says
why on it); the final message keeps them folded, and a person can still open one; a run that drew
several images ends with one new-seed menu, whose every entry starts a new-seed run that works."""

import contextlib
import json
import threading
import time
from dataclasses import dataclass, field

import pytest
from app_support import app_settings, fake_catalog, photo, responder, running_app
from fakes.endpoints import FakeEndpoint
from fakes.llm_server import Reply
from test_browser import SCREENSHOTS, _browser_or_skip, chromium, open_app

SIZES = [(1280, 900), (390, 844)]
# Every box the chat draws now (a folded box's inner boxes are not drawn): its title and whether open.
BOXES = """() => [...document.querySelectorAll('#chat .thought-group > .title')].map(t => ({
  title: t.innerText.replace(/\\s+/g, ' ').trim(), open: t.classList.contains('expanded')}))"""
PAINTING = "Task 1 · text-to-image · org/painter · ◔ running"
PICTURES = ["a red fox", "a blue whale", "a green frog"]


@dataclass
class GatedPainter(FakeEndpoint):
    """The fake endpoint, whose painter runs until the test opens the gate."""

    gate: threading.Event = field(default_factory=threading.Event)
    waiting: threading.Event = field(default_factory=threading.Event)  # the painter has started

    def run(self, task, model, inputs, call):
        if task == "text-to-image":
            self.waiting.set()
            assert self.gate.wait(60), "the test never opened the gate"
        return super().run(task, model, inputs, call)


def boxes(page) -> dict[str, bool]:
    return {b["title"]: b["open"] for b in page.evaluate(BOXES)}


def settled_boxes(page, ok, seconds: float = 10.0) -> dict[str, bool]:
    """The boxes once `ok` holds of them, or as they are after `seconds`: a box folds with an animation,
    and its inner boxes stay drawn until it ends (longer on a loaded machine)."""
    deadline = time.monotonic() + seconds
    drawn = boxes(page)
    while not ok(drawn) and time.monotonic() < deadline:
        time.sleep(0.1)
        drawn = boxes(page)
    return drawn


def gone(locator, seconds: float = 10.0) -> bool:
    """Whether `locator` matches nothing within `seconds` (a folding box's text goes when it has folded)."""
    deadline = time.monotonic() + seconds
    while locator.count() and time.monotonic() < deadline:
        time.sleep(0.1)
    return locator.count() == 0


def send(page, text: str, picture=None) -> None:
    if picture is not None:
        page.locator("#request input[type=file]").set_input_files(str(picture))
        page.locator("#request img").first.wait_for()
    page.locator("#request textarea").fill(text)
    page.locator("#request textarea").press("Enter")


@pytest.mark.browser
def test_only_the_running_box_is_open_and_finished_ones_fold_to_a_line(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    endpoint = GatedPainter(duration=0.05, failing={"org/speaker"})
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    settings = app_settings(llm_server, tmp_path / "ws")
    with (
        running_app(settings, catalog=fake_catalog(), endpoint=endpoint) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        for n, (width, height) in enumerate(SIZES):
            endpoint.gate.clear()
            endpoint.waiting.clear()
            page = open_app(browser, demo.local_url, width=width, height=height)
            chat = page.locator("#chat")
            picture = photo(tmp_path / f"street{n}.png", (48 + 8 * n, 40))  # not from the cache
            send(page, f"[conv-calm{n}] caption this, draw it and read it aloud", picture)
            assert endpoint.waiting.wait(30), "the painter never started"
            failed = chat.locator(".title").filter(
                has_text="Task 2 · text-to-speech · org/speaker · ✕ failed"
            )
            failed.wait_for()
            during = settled_boxes(
                page, lambda b: [t for t, o in b.items() if o and t.startswith("Task ")] == [PAINTING]
            )
            tasks = {title: is_open for title, is_open in during.items() if title.startswith("Task ")}
            assert len(tasks) == 3, during
            running = [title for title, is_open in tasks.items() if is_open]
            assert running == ["Task 1 · text-to-image · org/painter · ◔ running"], during  # the one open
            caption = next(t for t in tasks if t.startswith("Task 0"))
            assert caption.startswith("Task 0 · image-to-text · org/captioner-a · ✓ done ("), (
                caption
            )  # + time
            speech = next(t for t in tasks if t.startswith("Task 2"))
            assert "— org/speaker crashed" in speech, speech  # why, on its folded line
            assert gone(chat.get_by_text("Why: org/captioner-a is small and runs locally"))  # folded
            page.screenshot(path=str(SCREENSHOTS / f"run_view_during_{width}x{height}.png"))

            chat.locator(".title").filter(has_text="Task 0 · image-to-text").click()  # a person opens one
            chat.get_by_text("Why: org/captioner-a is small and runs locally").wait_for()
            assert boxes(page)["Task 1 · text-to-image · org/painter · ◔ running"]  # still open

            endpoint.gate.set()
            chat.get_by_text(f"Answer for conv-calm{n}").wait_for()
            page.locator("#stop").wait_for(state="hidden")
            after = settled_boxes(page, lambda b: len(b) == 1)
            assert len(after) == 1 and not any(after.values()), after  # the work: one folded line
            summary = chat.locator(".title").filter(has_text="3 tasks")
            assert "✕ failed 1" in summary.inner_text()
            page.screenshot(path=str(SCREENSHOTS / f"run_view_end_{width}x{height}.png"))

            summary.click()  # opened, the work shows its plan folded, and the plan its tasks folded
            plan = chat.locator(".title").filter(has_text="Plan: 3 tasks")
            plan.wait_for()
            assert not boxes(page)[plan.inner_text().strip()]
            plan.click()
            failed.wait_for()
            tasks = {t: o for t, o in boxes(page).items() if t.startswith("Task ")}
            assert len(tasks) == 3 and not any(tasks.values()), tasks
            failed.click()  # and a person can still open one to see it whole
            chat.get_by_text("Failed: org/speaker crashed").wait_for()
            page.close()


@contextlib.contextmanager
def three_pictures(server):
    """Requests tagged [conv-many] are planned as three pictures drawn side by side."""

    def plan(stage, body):
        if stage == "plan" and "[conv-many" in body["messages"][-1]["content"]:
            tasks = [
                {"task": "text-to-image", "id": i, "dep": [-1], "args": {"text": text}}
                for i, text in enumerate(PICTURES)
            ]
            return Reply(json.dumps({"tasks": tasks}), delay=0.05)
        return responder(stage, body)

    server.responder = plan
    try:
        yield
    finally:
        server.responder = responder


@pytest.mark.browser
def test_a_run_of_several_images_ends_with_one_seed_menu_whose_entries_each_run(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    endpoint = FakeEndpoint(duration=0.05)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with (
        three_pictures(llm_server),
        running_app(
            app_settings(llm_server, tmp_path / "ws"), catalog=fake_catalog(), endpoint=endpoint
        ) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        for width, height in SIZES:
            page = open_app(browser, demo.local_url, width=width, height=height)
            chat = page.locator("#chat")
            buttons = chat.locator("button.option")
            send(page, f"[conv-many{width}] draw three pictures")
            chat.get_by_text(f"Answer for conv-many{width}").wait_for()
            page.locator("#stop").wait_for(state="hidden")
            menu = chat.get_by_role("button", name="↻ New seed ▾ (3 outputs)")
            menu.wait_for()
            assert buttons.all_inner_texts() == ["↻ New seed ▾ (3 outputs)", "✎ Edit the plan"]
            assert chat.get_by_role("button", name="Retry", exact=True).is_enabled()
            for version, task in enumerate((1, 2, 0), start=1):
                menu.click()  # opens into one entry per drawn task
                entry = chat.get_by_role("button", name=f"↻ New image for task {task}")
                entry.wait_for()
                assert buttons.all_inner_texts() == [
                    "↻ New seed ▴",
                    "↻ New image for task 0",
                    "↻ New image for task 1",
                    "↻ New image for task 2",
                    "✎ Edit the plan",
                ]
                for button in buttons.all():  # each in view across the page, phones included
                    box = button.bounding_box()
                    assert box is not None and 0 <= box["x"] and box["x"] + box["width"] <= width, box
                if version == 1:
                    page.screenshot(path=str(SCREENSHOTS / f"seed_menu_{width}x{height}.png"))
                before = len(endpoint.calls)
                entry.click()  # a new seed for that task: only it runs, in place of the old answer
                chat.get_by_text(f"Version {version} · replaced: a new seed for task {task}").wait_for()
                page.locator("#stop").wait_for(state="hidden")
                menu.wait_for()  # the menu is folded again under the new answer
                assert [(c[0], c[2]["text"]) for c in endpoint.calls[before:]] == [
                    ("text-to-image", PICTURES[task])
                ]
                assert chat.get_by_text(f"Answer for conv-many{width}").count() == 1  # the old one folded
            menu.click()
            chat.get_by_role("button", name="↻ New seed ▴").click()  # and the menu folds without a run
            chat.get_by_role("button", name="↻ New seed ▴").wait_for(state="detached")
            assert buttons.all_inner_texts() == ["↻ New seed ▾ (3 outputs)", "✎ Edit the plan"]
            page.close()
