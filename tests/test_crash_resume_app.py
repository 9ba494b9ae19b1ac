"""The app killed with SIGKILL mid-run and started again (issue 29): `python app.py` in its own
process, a request typed into its page in headless Chromium, the app killed while the plan streams,
between two tasks and while the answer streams; the restarted app continues the run once on its own
(resume_on_start), no task that had finished runs again (counted at the expert server), only the LLM
calls that had not ended are made again, every record reads, and the run ends answered. A run that
was being continued when the app died again is not continued a second time: its note says so, and
its "▶ Continue" option takes it up, its finished tasks marked as from before the restart."""

import pytest
from crash_app_support import AppHarness, ask, journal_files, record_of, wait_answered
from crash_support import ANSWER, Point
from test_browser import _browser_or_skip, chromium

from hugginggpt.run.journal import read_journal
from webui.chat import interrupted

SECONDS = {"text-to-image": 0.8, "image-to-text": 0.5, "text-to-speech": 0.6, "image-classification": 0.5}
POINTS = [
    Point("plan stream", "plan", 0.6),
    Point("a task ended, the next one running", "end:text-to-image", 0.2),
    Point("during the answer", "respond", 0.3),
]
SCREENSHOTS = __import__("pathlib").Path(__file__).resolve().parent.parent / ".tmp" / "screenshots"


@pytest.fixture(scope="module")
def browser_and_harness(tmp_path_factory):
    sync_playwright = _browser_or_skip()
    root = tmp_path_factory.mktemp("crash-app")
    h = AppHarness(root, rate=50, seconds=SECONDS)
    try:
        with sync_playwright() as p, chromium(p) as browser:
            yield browser, h
    finally:
        h.close()


def context_of(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # one browser's store
    context.set_default_timeout(60_000)
    return context


@pytest.mark.browser
@pytest.mark.parametrize("point", POINTS, ids=[p.name for p in POINTS])
def test_a_killed_app_continues_the_run_on_start_without_running_a_finished_task_again(
    browser_and_harness, point, tmp_path
):
    browser, h = browser_and_harness
    context = context_of(browser)
    try:
        o = h.crash_app_and_continue(point, context, tmp_path / "ws")
    finally:
        context.close()
    assert o.killed, "the run ended before the kill: the point is too late for this machine"
    assert o.continued and o.answered, o.where
    assert o.ran_again == []
    assert o.records_read
    assert sorted(o.llm_after) == sorted(o.llm_expected), o.where
    if point.trigger == "respond":
        assert len(o.finished_before) == 4 and o.llm_after == ["respond"]
    if point.trigger.startswith("end:"):
        assert "text-to-image" in o.finished_before


@pytest.mark.browser
def test_a_run_the_app_died_continuing_is_not_continued_again_and_continue_takes_it_up(
    browser_and_harness, tmp_path
):
    browser, h = browser_and_harness
    folder = tmp_path / "ws"
    context = context_of(browser)
    try:
        h.script()
        first = h.start_app(folder)
        mark = len(h.experts.log)
        ask(context, first.url).close()
        assert h.kill_at(first, Point("a task ended", "end:text-to-image", 0.2), mark)
        drawn = h.experts.started(mark)["text-to-image"]

        second = h.start_app(folder, port=first.port)  # continues the run on start, and dies while doing so
        assert h.kill_at(second, Point("inside a task", "start:text-to-speech", 0.1), mark)
        assert [read_journal(j).crashes for j in journal_files(folder)] == [0, 1]
        expert_mark, llm_mark = len(h.experts.log), len(h.llm.requests)
        finished = sorted(read_journal(journal_files(folder)[-1]).finished)

        third = h.start_app(folder, port=first.port)  # resume_on_start on: this run is not continued again
        try:
            page = context.new_page()
            page.goto(third.url)
            chat = page.locator("#chat")
            chat.get_by_text(interrupted.AGAIN.strip("*")[:60]).wait_for()  # the note says why
            assert len(journal_files(folder)) == 2 and h.llm.requests[llm_mark:] == []

            page.get_by_role("button", name="▶ Continue").click()
            chat.get_by_text(ANSWER[:40]).wait_for()
            page.locator("#stop").wait_for(state="hidden")
            # the drawn picture's caption says so on the page, each finished task's box title too
            chat.get_by_text("Task 0 · text-to-image · crash/t2i-small · from before the restart").wait_for()
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "crash_resume_continued.png"))
            assert wait_answered(folder)
            titles = [str((m.get("metadata") or {}).get("title")) for m in record_of(folder)["display"]]
            marked = {
                int(t.split(" · ")[0][5:]) for t in titles if t.startswith("Task ") and "from before" in t
            }
            assert marked == set(finished)
        finally:
            third.kill()
        again = h.experts.started(expert_mark)
        assert [task for task in again if again[task] and task != "text-to-speech"] == []
        assert again["text-to-speech"] == 1 and drawn == 1  # in flight at the kill: run again, once
        assert [r["stage"] for r in h.llm.requests[llm_mark:]] == ["respond"]
    finally:
        context.close()
