"""The DAG scheduler: concurrency, data flow, fallback, time-outs, skipping."""

import threading
import time

import pytest
from fakes.endpoints import FakeEndpoint, cards

from hugginggpt.files.workspace import Workspace
from hugginggpt.run import steps
from hugginggpt.run.events import PickSource, Stage, StageStarted, TaskFailed, TaskSkipped, TaskStarted
from hugginggpt.run.records import TaskStatus
from hugginggpt.run.task_graph import execute_steps
from hugginggpt.stages.execute import ExecutionSettings, RunContext
from hugginggpt.stages.plan import parse_plan
from hugginggpt.stages.selection import Choice


@pytest.fixture
def workspace(tmp_path):
    ws = Workspace(tmp_path / "conv")
    (tmp_path / "cat.png").write_bytes(b"png")
    ws.add_upload(tmp_path / "cat.png")
    return ws


def choose(plan, models_per_task=("m1", "m2")):
    return {
        t.id: Choice(t.id, t.task, c[0], "test", tuple(c))
        for t in plan.tasks
        for c in [cards(*[(m, t.task, 10 - i) for i, m in enumerate(models_per_task)])]
    }


def context(workspace, endpoint, cancelled=None, **settings):
    return RunContext(
        endpoint,
        workspace,
        workspace.run_dir("r1"),
        ExecutionSettings(**settings),
        cancelled or threading.Event(),
    )


def drain(stream):
    """Every event of an execution, and its records by task id."""
    events = []
    records = steps.drain(stream, events.append)
    return events, {r.id: r for r in records}


def run(plan, endpoint, workspace, **settings):
    return drain(execute_steps(plan, choose(plan), context(workspace, endpoint, **settings)))


FOUR = parse_plan(
    str([{"task": "text-to-image", "id": i, "dep": [-1], "args": {"text": f"cat {i}"}} for i in range(4)])
)
CHAIN = parse_plan(
    '[{"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": "cat.png"}},'
    ' {"task": "text-to-image", "id": 1, "dep": [0], "args": {"text": "<resource>-0"}},'
    ' {"task": "image-classification", "id": 2, "dep": [1], "args": {"image": "<resource>-1"}}]'
)


def test_independent_tasks_run_at_the_same_time(workspace):
    endpoint = FakeEndpoint(duration=0.3)
    events, records = run(FOUR, endpoint, workspace, max_workers=4)
    assert endpoint.peak == 4
    assert all(r.status == "done" for r in records.values())


def test_pool_is_bounded(workspace):
    endpoint = FakeEndpoint(duration=0.1)
    run(FOUR, endpoint, workspace, max_workers=2)
    assert endpoint.peak == 2


def test_outputs_flow_along_the_chain(workspace):
    endpoint = FakeEndpoint()
    events, records = run(CHAIN, endpoint, workspace)
    (t0, _, in0), (t1, _, in1), (t2, _, in2) = endpoint.calls
    assert in0["image"] == workspace.uploads_dir / "cat.png"
    assert in1["text"].startswith("image-to-text by m1 on image=cat.png")  # <resource>-0 became its text
    assert in2["image"] == records[1].output("image").path
    assert events[0] == StageStarted(Stage.EXECUTE)  # the graph announces its first start
    order = [(type(e).__name__, e.task_id) for e in events[1:]]
    assert order == [
        ("TaskStarted", 0),
        ("TaskFinished", 0),
        ("TaskStarted", 1),
        ("TaskFinished", 1),
        ("TaskStarted", 2),
        ("TaskFinished", 2),
    ]


def test_failing_model_falls_back_to_the_next_candidate(workspace):
    endpoint = FakeEndpoint(failing={"m1"})
    events, records = run(CHAIN, endpoint, workspace)
    failures = [e for e in events if isinstance(e, TaskFailed)]
    assert failures and all(not f.final for f in failures)
    assert all(r.status == "done" and r.model == "m2" for r in records.values())
    assert records[0].attempts[0] == {
        "model": "m1",
        "error": "m1 crashed",
        "seconds": records[0].attempts[0]["seconds"],
    }


def test_task_failing_for_good_skips_its_dependants_with_the_reason(workspace):
    endpoint = FakeEndpoint(failing={"m1", "m2"})
    events, records = run(CHAIN, endpoint, workspace, task_attempts=2)
    assert records[0].status == "failed" and records[0].error == "m2 crashed"
    skipped = [e for e in events if isinstance(e, TaskSkipped)]
    assert [s.task_id for s in skipped] == [1, 2]
    assert "task 0 (image-to-text), which failed" in skipped[0].reason
    assert [c[1] for c in endpoint.calls] == ["m1", "m2"]  # nothing ran after the failure


def test_attempts_are_configurable(workspace):
    endpoint = FakeEndpoint(failing={"m1"})
    events, records = run(CHAIN, endpoint, workspace, task_attempts=1)
    assert records[0].status == "failed" and len(endpoint.calls) == 1


def test_unavailable_model_falls_back(workspace):
    endpoint = FakeEndpoint(unavailable={"m1"})
    _, records = run(CHAIN, endpoint, workspace)
    assert records[2].status == "done" and records[2].model == "m2"


def test_hung_model_times_out_and_the_next_one_runs(workspace):
    endpoint = FakeEndpoint(hanging={"m1"}, hang=3)
    events, records = run(CHAIN, endpoint, workspace, task_timeout=0.2)
    timeouts = [e for e in events if isinstance(e, TaskFailed)]
    assert timeouts[0].error == "timed out after 0.2 s" and not timeouts[0].final
    assert records[0].status == "done" and records[0].model == "m2"
    deadline = time.monotonic() + 2
    while len(endpoint.stopped) < len(timeouts) and time.monotonic() < deadline:  # each notices within 10 ms
        time.sleep(0.01)
    assert endpoint.stopped == ["m1"] * len(
        timeouts
    )  # timed-out calls were told to stop, not left to run 3 s


def test_cancelling_stops_a_running_call_at_once(workspace):
    """Stop must end the call in flight (a local diffusion run checks between steps), so the model
    and the GPU are free again, and must not fall back to the next candidate."""
    plan = parse_plan('[{"task": "text-to-image", "id": 0, "dep": [-1], "args": {"text": "a"}}]')
    endpoint = FakeEndpoint(hanging={"m1", "m2"}, hang=20)
    cancelled = threading.Event()
    stream = execute_steps(plan, choose(plan), context(workspace, endpoint, cancelled, task_timeout=30))
    assert next(stream) == StageStarted(Stage.EXECUTE)
    assert isinstance(next(stream), TaskStarted)
    threading.Timer(0.2, cancelled.set).start()
    events, records = drain(stream)  # ends soon after the cancel, not after the 20 s the call would take
    assert endpoint.stopped == ["m1"] and [c[1] for c in endpoint.calls] == ["m1"]
    assert records[0].status is TaskStatus.STOPPED
    assert not any(isinstance(e, TaskStarted) for e in events)


def test_independent_branch_still_runs_when_another_fails(workspace):
    plan = parse_plan(
        '[{"task": "text-to-image", "id": 0, "dep": [-1], "args": {"text": "a"}},'
        ' {"task": "image-classification", "id": 1, "dep": [0], "args": {"image": "<resource>-0"}},'
        ' {"task": "summarization", "id": 2, "dep": [-1], "args": {"text": "b"}}]'
    )
    choices = choose(plan)
    reason = "no model in the catalog can run text-to-image here"
    choices[0] = Choice(0, "text-to-image", None, reason, (), PickSource.NO_CANDIDATE)
    _, records = drain(execute_steps(plan, choices, context(workspace, FakeEndpoint())))
    assert records[0].status == "failed" and "no model" in records[0].error
    assert records[1].status == "skipped" and records[2].status == "done"


def test_file_outside_the_workspace_is_refused_before_running(workspace):
    plan = parse_plan('[{"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": "/etc/passwd"}}]')
    endpoint = FakeEndpoint()
    events, records = run(plan, endpoint, workspace)
    assert records[0].status == "failed" and "outside" in records[0].error
    assert endpoint.calls == []


def test_closing_the_stream_cancels_tasks_not_yet_started(workspace):
    endpoint = FakeEndpoint(duration=0.2)
    cancelled = threading.Event()
    stream = execute_steps(CHAIN, choose(CHAIN), context(workspace, endpoint, cancelled))
    assert next(stream) == StageStarted(Stage.EXECUTE)
    assert isinstance(next(stream), TaskStarted)
    stream.close()
    assert cancelled.is_set()
    threading.Event().wait(0.5)
    assert len(endpoint.calls) == 1  # task 1 and 2 never started


def test_text_references_to_task_1_and_task_10_are_filled_in_separately(workspace):
    tasks = [
        {"task": "text-generation", "id": i, "dep": [-1], "args": {"text": f"topic {chr(97 + i)}"}}
        for i in range(11)
    ]
    tasks.append(
        {
            "task": "summarization",
            "id": 11,
            "dep": [1, 10],
            "args": {"text": "first <resource>-1 then <resource>-10 end"},
        }
    )
    endpoint = FakeEndpoint()
    _, records = run(parse_plan(str(tasks)), endpoint, workspace, max_workers=4)
    text = next(inputs["text"] for task, _, inputs in endpoint.calls if task == "summarization")
    assert text == f"first {records[1].output('text').value} then {records[10].output('text').value} end"
