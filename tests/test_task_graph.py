"""The task graph (hugginggpt/run/task_graph.py): tasks added as they arrive, a start held until close,
tasks added finished (resume), one skip wording, warming in every path."""

import threading

import pytest
from fakes.endpoints import FakeEndpoint, cards
from test_execute import CHAIN, choose, context

from hugginggpt.catalog import ModelCard
from hugginggpt.files.artifacts import Artifact, ArtifactKind
from hugginggpt.files.workspace import Workspace
from hugginggpt.run.events import TaskFinished, TaskSkipped, TaskStarted
from hugginggpt.run.records import TaskRecord, TaskStatus
from hugginggpt.run.steps import drain
from hugginggpt.run.task_graph import TaskGraph, execute_steps
from hugginggpt.stages.plan import Plan, Task
from hugginggpt.stages.selection import Choice


class WarmingEndpoint(FakeEndpoint):
    """Records what it was asked to warm."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.warmed: list[str] = []
        self.warm_seen = threading.Event()

    def warm(self, task: str, model: ModelCard) -> bool:
        self.warmed.append(f"{task}:{model.id}")
        self.warm_seen.set()
        return True


@pytest.fixture
def workspace(tmp_path):
    ws = Workspace(tmp_path / "conv")
    (tmp_path / "cat.png").write_bytes(b"png")
    ws.add_upload(tmp_path / "cat.png")
    return ws


def collect(stream):
    events: list = []
    return events, drain(stream, events.append)


def test_a_whole_plan_warms_the_models_of_tasks_that_wait_for_their_inputs(workspace):
    endpoint = WarmingEndpoint(duration=0.2)
    events, records = collect(execute_steps(CHAIN, choose(CHAIN), context(workspace, endpoint)))
    assert [r.status for r in records] == [TaskStatus.DONE] * 3
    assert endpoint.warmed == ["text-to-image:m1", "image-classification:m1"]  # not task 0: it starts


def test_a_held_graph_starts_nothing_before_close_but_warms(workspace):
    endpoint = WarmingEndpoint()
    graph = TaskGraph(context(workspace, endpoint), hold=True)
    choices = choose(CHAIN)
    graph.add(CHAIN.tasks[0], choices[0])
    seen = []

    def handle(message):
        # each message of the caller's: one more task arrives; the last one closes the graph
        seen.append(list(endpoint.calls))
        task = CHAIN.tasks[message]
        graph.add(task, choices[task.id])
        if message == 2:
            graph.close()
        return []

    graph.inbox.put(1)
    graph.inbox.put(2)
    events = list(graph.run(handle))
    assert seen == [[], []]  # nothing ran while the plan was open
    assert endpoint.warm_seen.wait(5)
    assert endpoint.warmed[0] == "image-to-text:m1"  # warmed while held
    assert [c[0] for c in endpoint.calls] == ["image-to-text", "text-to-image", "image-classification"]
    assert [e.task_id for e in events if isinstance(e, TaskFinished)] == [0, 1, 2]


def test_a_task_added_finished_feeds_its_dependants_and_never_runs(workspace):
    endpoint = FakeEndpoint()
    graph = TaskGraph(context(workspace, endpoint))
    choices = choose(CHAIN)
    record = TaskRecord(0, "image-to-text", dict(CHAIN.tasks[0].args), model="m1", status=TaskStatus.DONE)
    record.outputs = [Artifact(ArtifactKind.TEXT, value="a cat on a mat")]
    graph.add_finished(CHAIN.tasks[0], choices[0], record)
    for task in CHAIN.tasks[1:]:
        graph.add(task, choices[task.id])
    graph.close()
    events = list(graph.run())
    assert [c[0] for c in endpoint.calls] == ["text-to-image", "image-classification"]
    assert endpoint.calls[0][2]["text"] == "a cat on a mat"
    assert [e.task_id for e in events if isinstance(e, TaskStarted)] == [1, 2]
    assert graph.records(CHAIN)[0] is record and graph.choices()[0] == choices[0]


def test_dependants_are_skipped_with_one_wording_down_a_chain(workspace):
    plan = Plan(
        [
            Task(0, "summarization", [], {"text": "x"}),
            Task(1, "summarization", [0], {"text": "<resource>-0"}),
            Task(2, "summarization", [1], {"text": "<resource>-1"}),
        ]
    )
    choices = {t.id: Choice(t.id, t.task, None, "no model here") for t in plan.tasks}
    events, records = collect(execute_steps(plan, choices, context(workspace, FakeEndpoint())))
    skipped = [e for e in events if isinstance(e, TaskSkipped)]
    assert [s.reason for s in skipped] == [
        "it needs task 0 (summarization), which failed",
        "it needs task 1 (summarization), which was skipped",
    ]
    assert [r.status for r in records] == [TaskStatus.FAILED, TaskStatus.SKIPPED, TaskStatus.SKIPPED]


def test_a_task_waiting_for_its_choice_starts_once_chosen(workspace):
    endpoint = FakeEndpoint()
    graph = TaskGraph(context(workspace, endpoint))
    node = graph.add(Task(0, "text-to-image", [], {"text": "a cat"}))
    model = cards(("m1", "text-to-image", 1))[0]

    def handle(message):
        assert endpoint.calls == []  # no choice yet: it waited
        graph.choose(node, Choice(0, "text-to-image", model, "picked", (model,)))
        graph.close()
        return []

    graph.inbox.put("picked")
    events = list(graph.run(handle))
    assert [c[1] for c in endpoint.calls] == ["m1"]
    assert any(isinstance(e, TaskFinished) for e in events)
