"""Crash and resume with real processes: `python -m hugginggpt` killed with SIGKILL at four points
of a run (the plan streaming, inside a task, between two tasks, the answer streaming), then
`python -m hugginggpt resume`. Counted at the expert server: no task that had finished runs again;
at the fake LLM: only the calls that had not ended are made again. bench/crash_resume.py runs 20
points and times the restart against a plain retry."""

import pytest
from crash_support import Point, harness

SECONDS = {"text-to-image": 0.8, "image-to-text": 0.4, "text-to-speech": 0.4, "image-classification": 0.4}
POINTS = [
    Point("plan stream", "plan", 0.5),
    Point("inside a task", "start:image-to-text", 0.2),
    Point("between tasks", "end:text-to-image", 0.0),
    Point("during the answer", "respond", 0.3),
]


@pytest.fixture(scope="module")
def crashes(tmp_path_factory):
    with harness(tmp_path_factory.mktemp("crash"), rate=100, seconds=SECONDS) as h:
        yield h


@pytest.mark.parametrize("point", POINTS, ids=[p.name for p in POINTS])
def test_a_killed_run_resumes_without_running_a_finished_task_again(crashes, point):
    outcome = crashes.crash_and_resume(point)
    assert outcome.killed, "the run ended before the kill: the point is too late for this machine"
    assert outcome.answered, outcome.errors
    assert outcome.ran_again == []
    assert outcome.records_read
    assert sorted(outcome.llm_after) == sorted(outcome.llm_expected), outcome.where
    if point.trigger.startswith(
        "start:image-to-text"
    ):  # a task's end is journaled before its dependants start
        assert "text-to-image" in outcome.finished_before
    if point.trigger == "respond":
        assert len(outcome.finished_before) == 4 and outcome.llm_after == ["respond"]
