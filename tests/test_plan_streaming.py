"""Streaming execution: tasks start while the LLM writes the plan (hugginggpt/run/streaming_run.py).

The fake LLM server streams the plan a few characters at a time, as a real server does; the
scripted endpoint records when each model call starts and whether it was told to stop.
"""

import copy
import json
import threading
import time

import pytest
from fakes.endpoints import FakeEndpoint, cards
from fakes.llm_server import FakeLLMServer, Reply

from hugginggpt.catalog import Catalog
from hugginggpt.commands.progress import describe
from hugginggpt.config import Settings
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.run.events import (
    Done,
    ModelSelected,
    Outcome,
    PickSource,
    PlanReady,
    PlanRejected,
    TaskDropped,
    TaskFinished,
    TaskPlanned,
    TaskStarted,
)
from hugginggpt.run.pipeline import Pipeline
from hugginggpt.stages.plan import PlanLimits, Task
from hugginggpt.stages.plan_stream import TaskScanner
from webui.chat.render import RunView

CATALOG = Catalog(
    cards(
        ("det-big", "object-detection", 900),
        ("det-small", "object-detection", 500),
        ("cap-only", "image-to-text", 100),
        ("tts-a", "text-to-speech", 50),
    )
)


def task(i, kind, args, dep=()):
    return {"task": kind, "id": i, "dep": list(dep) or [-1], "args": args}


CAPTION = task(0, "image-to-text", {"image": "photo.png"})
SPEAK = task(1, "text-to-speech", {"text": "<resource>-0"}, [0])


def plan_reply(*tasks, chunk_delay=0.01):
    return Reply(json.dumps({"tasks": list(tasks)}), chunk_chars=4, chunk_delay=chunk_delay)


class TimedEndpoint(FakeEndpoint):
    """Records when each model call starts, and each warm-up."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.started: dict[str, float] = {}
        self.warmed: list[tuple[str, str]] = []

    def run(self, task, model, inputs, call):
        self.started.setdefault(f"{task}:{model.id}", time.monotonic())
        return super().run(task, model, inputs, call)

    def warm(self, task, model):
        self.warmed.append((task, model.id))
        return True


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def photo(tmp_path):
    path = tmp_path / "photo.png"
    path.write_bytes(b"\x89PNG fake")
    return path


def pipeline(server, endpoint, **settings):
    llm = OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="x", timeout=5, max_retries=0)
    return Pipeline(llm=llm, catalog=CATALOG, endpoint=endpoint, settings=Settings(**settings))


def run(p, tmp_path, photo, request="caption it and read it aloud", cancelled=None):
    events = []
    workspace = Workspace(tmp_path / "conv")
    for event in p.run(request, workspace=workspace, files=[photo], cancelled=cancelled):
        events.append((time.monotonic(), event))
    return events, events[-1][1]


def first(events, kind, **fields):
    return next(
        (at, e)
        for at, e in events
        if isinstance(e, kind) and all(getattr(e, k) == v for k, v in fields.items())
    )


# ---- the scanner ------------------------------------------------------------------------------


def test_the_scanner_takes_each_task_object_the_moment_it_closes():
    reply = (
        'Here is the plan: ```json\n{"tasks": [{"task": "image-to-text", "id": 0, "dep": [-1], '
        '"args": {"image": "a {b} \\" [c].png"}}, {"task": "text-to-speech", "id": 1, "dep": [0], '
        '"args": {"text": "<resource>-0"}}]}\n```'
    )
    scanner = TaskScanner()
    found = {}
    for at, char in enumerate(reply):
        for raw in scanner.feed(char):
            found[raw["id"]] = (at, raw)
    assert sorted(found) == [0, 1]
    assert found[0][1]["args"]["image"] == 'a {b} " [c].png'  # braces and quotes inside strings
    assert reply[found[0][0]] == "}" and reply[found[0][0] + 1] == ","  # at its own brace
    assert found[1][0] < reply.rindex("]")  # before the plan's list ends


def test_the_scanner_stays_within_the_plan_limits():
    scanner = TaskScanner(PlanLimits(max_chars=300, max_tasks=2))
    one = json.dumps(task(0, "image-to-text", {"image": "p.png"}))
    got = scanner.feed("[" + ", ".join([one] * 3))
    assert len(got) == 2  # no more tasks than a plan may have
    assert scanner.feed(", " + one * 10) == []  # past max_chars nothing more is read


# ---- whole requests ---------------------------------------------------------------------------


def test_tasks_start_while_the_plan_is_written_and_the_trace_times_them(server, photo, tmp_path):
    padding = [task(i, "text-to-speech", {"text": f"word {i}"}) for i in range(2, 5)]
    server.script("plan", plan_reply(CAPTION, SPEAK, *padding))
    server.script("respond", "done")
    endpoint = TimedEndpoint(duration=0.05)
    events, done = run(pipeline(server, endpoint), tmp_path, photo)
    assert done.error is None and done.outcome is Outcome.ANSWERED
    plan_at, _ = first(events, PlanReady)
    started_at, _ = first(events, TaskStarted, task_id=0)
    assert endpoint.started["image-to-text:cap-only"] < plan_at and started_at < plan_at
    # one candidate per task: no selection call at all
    assert server.stages() == ["plan", "respond"] and done.llm_calls == 2
    times = {t["id"]: t for t in done.trace["plan_stream"]["tasks"]}
    assert set(times) == set(range(5))
    for t in times.values():
        assert t["parsed"] <= t["selected"] <= t["started"] <= t["finished"]
    assert times[1]["started"] >= times[0]["finished"]  # it needed task 0's caption
    assert times[0]["started"] - times[0]["parsed"] < 0.3
    assert [r.id for r in done.records] == list(range(5))


def test_with_streaming_off_nothing_starts_before_the_plan_is_complete(server, photo, tmp_path):
    server.script("plan", plan_reply(CAPTION, SPEAK)).script("respond", "done")
    endpoint = TimedEndpoint()
    events, done = run(pipeline(server, endpoint, stream_execution=False), tmp_path, photo)
    assert done.error is None and "plan_stream" not in done.trace
    assert not any(isinstance(e, TaskPlanned) for _, e in events)
    plan_at, _ = first(events, PlanReady)
    assert min(endpoint.started.values()) > plan_at


def test_a_model_choice_is_made_as_tasks_arrive_in_two_calls_at_most(server, photo, tmp_path):
    detect = [task(i, "object-detection", {"image": "photo.png"}) for i in range(1, 5)]
    server.script("plan", plan_reply(CAPTION, *detect))
    server.script("select", Reply('{"1": {"id": "det-small", "reason": "small"}}', delay=0.3), "{}")
    server.script("respond", "done")
    events, done = run(pipeline(server, TimedEndpoint()), tmp_path, photo)
    assert done.error is None
    assert server.stages() == ["plan", "select", "select", "respond"] and done.llm_calls == 4
    # the task with one candidate did not wait for the selection call in flight
    caption_at, _ = first(events, TaskStarted, task_id=0)
    chosen_at, _ = first(events, ModelSelected, task_id=1)
    assert caption_at < chosen_at
    picks = {e.task_id: e for _, e in events if isinstance(e, ModelSelected)}
    assert picks[1].model == "det-small" and picks[1].source is PickSource.LLM
    assert done.trace["plan_stream"]["select_calls"] == 2


def test_a_failed_selection_batch_falls_back_to_the_ranked_top(server, photo, tmp_path):
    detect = [task(i, "object-detection", {"image": "photo.png"}) for i in range(3)]
    server.script("plan", plan_reply(*detect))
    server.script("select", Reply("overloaded", status=500))
    server.script("respond", "done")
    events, done = run(pipeline(server, TimedEndpoint()), tmp_path, photo)
    assert done.error is None and done.outcome is Outcome.ANSWERED
    picks = [e for _, e in events if isinstance(e, ModelSelected)]
    assert len(picks) == 3
    assert all(p.model == "det-big" and p.source is PickSource.SELECTION_FAILED for p in picks)
    assert [r.model for r in done.records] == ["det-big"] * 3
    assert done.llm_calls <= 4


def test_a_dependency_on_a_task_not_yet_seen_waits_for_the_whole_plan(server, photo, tmp_path):
    speak_first = task(0, "text-to-speech", {"text": "<resource>-1"}, [1])
    caption_later = task(1, "image-to-text", {"image": "photo.png"})
    server.script("plan", plan_reply(speak_first, caption_later)).script("respond", "done")
    endpoint = TimedEndpoint()
    events, done = run(pipeline(server, endpoint), tmp_path, photo)
    assert done.error is None
    assert [e.task.id for _, e in events if isinstance(e, TaskPlanned)] == [1]  # 0 was not valid yet
    plan_at, _ = first(events, PlanReady)
    speak_at, _ = first(events, TaskStarted, task_id=0)
    caption_done_at, _ = first(events, TaskFinished, task_id=1)
    assert speak_at > plan_at and speak_at > caption_done_at
    (_, _, inputs) = next(c for c in endpoint.calls if c[0] == "text-to-speech")
    assert "image-to-text by cap-only" in inputs["text"]  # it got task 1's caption


def test_a_plan_whose_later_part_is_invalid_keeps_done_tasks_and_stops_dropped_ones(server, photo, tmp_path):
    slow_speech = task(1, "text-to-speech", {"text": "a long story"})
    wrong = task(2, "image-to-sound", {"image": "photo.png"})  # no such task type
    detect = task(1, "object-detection", {"image": "photo.png"})  # the id of the dropped task
    server.script("plan", plan_reply(CAPTION, slow_speech, wrong))
    server.script("plan", Reply(json.dumps({"tasks": [CAPTION, detect]}), delay=0.3))  # the fix
    server.script("select", "{}").script("respond", "done")
    endpoint = TimedEndpoint(hanging={"tts-a"}, hang=10)
    t0 = time.monotonic()
    events, done = run(pipeline(server, endpoint), tmp_path, photo)
    assert done.error is None and time.monotonic() - t0 < 5
    assert server.stages() == ["plan", "plan", "select", "respond"]
    kinds = [type(e).__name__ for _, e in events]
    assert kinds.index("PlanRejected") < kinds.index("TaskDropped") < kinds.index("PlanReady")
    # the caption was done before the fix came and ran once; the speech was stopped
    assert [c[1] for c in endpoint.calls].count("cap-only") == 1
    assert endpoint.stopped == ["tts-a"]
    dropped = [e for _, e in events if isinstance(e, TaskDropped)]
    assert [d.task_id for d in dropped] == [1]
    # nothing of the dropped task is the answer's work
    assert [(r.id, r.task) for r in done.records] == [(0, "image-to-text"), (1, "object-detection")]
    assert [t["id"] for t in done.trace["tasks"]] == [0, 1]
    files = [a.path for a in done.records[1].outputs if a.path is not None]
    assert files and all("replacement-" in str(f) for f in files)  # not where the dropped one wrote
    respond_prompt = json.dumps(server.requests[-1]["messages"])
    assert "cap-only" in respond_prompt and "tts-a" not in respond_prompt
    streamed = {(t["id"], t["task"]): t for t in done.trace["plan_stream"]["tasks"]}
    assert "dropped" in streamed[(1, "text-to-speech")] and "dropped" not in streamed[(0, "image-to-text")]
    assert not any(isinstance(e, TaskFinished) and e.task == "text-to-speech" for _, e in events)
    rejected = [e for _, e in events if isinstance(e, PlanRejected)]
    assert len(rejected) == 1 and "image-to-sound" in rejected[0].problems[0]


def test_a_task_done_before_the_correction_is_served_from_the_cache_under_its_new_id(server, photo, tmp_path):
    from hugginggpt.run.cache import ResultCache

    wrong = task(1, "image-to-sound", {"image": "photo.png"})
    renumbered = {**CAPTION, "id": 7}
    server.script("plan", plan_reply(CAPTION, wrong))
    server.script("plan", Reply(json.dumps({"tasks": [renumbered]}), delay=0.3))
    server.script("respond", "done")
    endpoint = TimedEndpoint()
    p = pipeline(server, endpoint)
    p.cache = ResultCache(tmp_path / "cache", 10**8)
    events, done = run(p, tmp_path, photo)
    assert done.error is None and [r.id for r in done.records] == [7]
    assert done.records[0].cached and [c[1] for c in endpoint.calls] == ["cap-only"]  # ran once
    assert [e.task_id for _, e in events if isinstance(e, TaskDropped)] == [0]


def test_stop_during_the_plan_stream_ends_the_call_and_the_tasks(server, photo, tmp_path):
    padding = [task(i, "text-to-speech", {"text": f"word {i}"}) for i in range(2, 12)]
    slow = task(1, "text-to-speech", {"text": "a long story"})
    server.script("plan", plan_reply(CAPTION, slow, *padding, chunk_delay=0.02))
    server.script("select", "{}").script("respond", "done")
    endpoint = TimedEndpoint(hanging={"tts-a"}, hang=10)
    cancelled = threading.Event()
    events = []
    t0 = time.monotonic()
    for event in pipeline(server, endpoint).run(
        "go", workspace=Workspace(tmp_path / "c"), files=[photo], cancelled=cancelled
    ):
        events.append(event)
        if isinstance(event, TaskStarted) and event.task_id == 1:
            cancelled.set()  # Stop pressed while the LLM is still writing the plan
    done = events[-1]
    assert isinstance(done, Done) and done.outcome is Outcome.CANCELLED and done.error is None
    assert time.monotonic() - t0 < 3
    assert not any(isinstance(e, PlanReady) for e in events)
    assert server.stages() == ["plan"] and endpoint.stopped == ["tts-a"]
    deadline = time.monotonic() + 2
    while not server.dropped_streams and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.dropped_streams == 1  # the planning call was closed, not read to its end


def test_a_model_is_warmed_while_its_task_waits_for_its_inputs(server, photo, tmp_path):
    server.script("plan", plan_reply(CAPTION, SPEAK, chunk_delay=0.002)).script("respond", "done")
    endpoint = TimedEndpoint(duration=0.5)
    _, done = run(pipeline(server, endpoint), tmp_path, photo)
    assert done.error is None
    assert endpoint.warmed == [("text-to-speech", "tts-a")]  # task 0 started at once: nothing to warm


# ---- how it is shown --------------------------------------------------------------------------


def test_the_plan_box_fills_in_task_by_task_and_forgets_dropped_tasks():
    view = RunView("r1")
    caption = Task(0, "image-to-text", [], {"image": "photo.png"})
    speak = Task(1, "text-to-speech", [], {"text": "hello"})
    view.feed(TaskPlanned(caption))
    assert "image-to-text" in view.plan_box["content"] and "1 so far" in view.plan_box["metadata"]["title"]
    view.feed(TaskPlanned(speak))
    view.feed(TaskStarted(1, "text-to-speech", "tts-a"))
    assert "text-to-speech" in view.plan_box["content"]
    view.feed(TaskDropped(1, "text-to-speech", "the corrected plan does not have this task"))
    titles = [(m.get("metadata") or {}).get("title", "") for m in view.messages]
    assert not any("text-to-speech" in t for t in titles)
    assert "text-to-speech" not in view.plan_box["content"]


def test_the_terminal_and_the_api_reasoning_show_each_task_as_it_arrives(tmp_path):
    line = describe(TaskPlanned(Task(1, "text-to-speech", [0], {"text": "<resource>-0"})), tmp_path)
    assert line == "[plan] task 1:text-to-speech<-[0] (the LLM is still writing the plan)"
    assert describe(TaskDropped(1, "text-to-speech", "gone"), tmp_path) == "[task 1] dropped: gone"


def test_the_local_runtime_loads_a_model_ahead_of_its_first_call(tmp_path):
    from models_local import Runtime
    from models_local.handlers.base import Handler

    def call(obj, inputs, outputs):
        outputs.artifacts.append({"kind": "text", "value": "ok"})

    handler = Handler(load=lambda source, device: object(), call=call, library="builtin")
    runtime = Runtime(memory_budget_bytes=2**20, device="cpu", handlers={"edges": handler})
    runtime.warm("edges", "m")
    assert runtime.loads == 1 and runtime.cached() == ["m"]
    assert runtime.run("edges", "m", {}, tmp_path) == [{"kind": "text", "value": "ok"}]
    assert runtime.loads == 1  # the call found it loaded


def test_a_task_that_fails_while_the_plan_streams_skips_what_needs_it(server, photo, tmp_path):
    server.script("plan", plan_reply(CAPTION, SPEAK)).script("respond", "done")
    endpoint = TimedEndpoint(failing={"cap-only"})
    events, done = run(pipeline(server, endpoint), tmp_path, photo)
    assert done.error is None
    assert [str(r.status) for r in done.records] == ["failed", "skipped"]
    assert done.records[1].error == "it needs task 0 (image-to-text), which failed"
    assert [c[0] for c in endpoint.calls] == ["image-to-text"]


def test_the_chat_shows_a_task_running_while_the_llm_still_writes_the_plan(server, tmp_path):
    from PIL import Image

    from webui.chat.engine import ChatApp
    from webui.host.session_settings import LLMChoice

    photo = tmp_path / "photo.png"
    Image.new("RGB", (16, 16), (90, 120, 200)).save(photo)

    padding = [task(i, "text-to-speech", {"text": f"word {i}"}) for i in range(2, 6)]
    server.script("plan", plan_reply(CAPTION, SPEAK, *padding, chunk_delay=0.02))
    server.script("respond", "done")
    settings = Settings(
        llm_base_url=server.url, llm_model="fake", llm_api_key="x", inference="local", workdir=str(tmp_path)
    )
    chat = ChatApp(settings, catalog=CATALOG, endpoint=TimedEndpoint(duration=0.2))
    seen = None
    turn = chat.respond("s1", {"text": "caption it", "files": [str(photo)]}, LLMChoice())
    for messages, _, _ in turn:
        titles = [(m.get("metadata") or {}).get("title", "") for m in messages]
        if any("so far" in t for t in titles) and any("Task 0" in t and "running" in t for t in titles):
            seen = copy.deepcopy(messages)  # as shown then (the run's messages change in place)
            break
    turn.close()
    assert seen is not None  # the plan box still filling in, and its first task already running
    box = next(m for m in seen if "so far" in (m.get("metadata") or {}).get("title", ""))
    # The list fills in as the plan is written; its graph is drawn once the plan is whole (issue 20:
    # a diagram replaced while Mermaid draws it throws in the browser, so it is not redrawn per task).
    assert "**image-to-text**" in box["content"] and "mermaid" not in box["content"]
    conv = chat.find("s1")
    assert conv is not None
    [ended] = [m for m in conv.display if (m.get("metadata") or {}).get("id") == "r1-plan"]
    assert "```mermaid" in ended["content"] and "image-to-text" in ended["content"]
