"""OpenTelemetry: what the real OTLP/HTTP exporter sends, decoded by a receiver on 127.0.0.1.

A 3-task request runs against a real expert server (models_local.serve in a thread, the builtin
canny edge detector, so no model files); its spans, the controller's and the server's, must form
one trace: root, stages, LLM calls with GenAI attributes, task attempts, and the server's spans
(queue wait, load, run) under the attempt that called it.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest
from fakes.llm_server import FakeLLMServer
from fakes.otlp_receiver import OTLPReceiver, ReceivedSpan
from PIL import Image
from serve_support import protocol_server

import models_local.telemetry
from hugginggpt.catalog import Catalog, ModelCard
from hugginggpt.config import Settings
from hugginggpt.endpoints import build_endpoint
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.observability import telemetry
from hugginggpt.run.events import Done, Outcome, StageStarted
from hugginggpt.run.pipeline import Pipeline
from hugginggpt.run.steps import collect
from models_local.serve import LocalBackend, ServerSettings, create_app

EDGES = "canny-control"
PLAN = {
    "tasks": [
        {"task": EDGES, "id": 0, "dep": [-1], "args": {"image": "photo.png"}},
        {"task": EDGES, "id": 1, "dep": [0], "args": {"image": "<resource>-0"}},
        {"task": EDGES, "id": 2, "dep": [1], "args": {"image": "<resource>-1"}},
    ]
}
KEY = "sk-visitor-secret-key"


@pytest.fixture
def otlp(monkeypatch):
    with OTLPReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        assert telemetry.configure() and models_local.telemetry.configure()
        yield receiver
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
        telemetry.configure()
        models_local.telemetry.configure()


@pytest.fixture
def experts():  # one server per test: each test sees its model loaded once
    settings = ServerSettings.from_mapping({"hub": True})
    with protocol_server(create_app(LocalBackend(settings.runtime()), settings.table())) as url:
        yield url


def run_request(experts: str, tmp_path, **settings) -> Done:
    photo = tmp_path / "photo.png"
    Image.new("RGB", (48, 48), "red").save(photo)
    catalog = Catalog(
        [
            ModelCard(id="lllyasviel/Annotators", task=EDGES, downloads=10),
            ModelCard(id="other/Annotators", task=EDGES, downloads=5),
        ]
    )
    with FakeLLMServer() as llm:
        llm.script("plan", '{"tasks": [{"task": "no-such-task", "id": 0}]}', json.dumps(PLAN))
        llm.script("select", '{"0": {"id": "lllyasviel/Annotators", "reason": "edges"}}')
        llm.script("respond", "Three edge maps.")
        client = OpenAICompatibleLLM(base_url=llm.url, model="fake-llm", api_key=KEY, max_retries=0)
        pipeline = Pipeline(
            llm=client,
            catalog=catalog,
            endpoint=build_endpoint("remote", experts_url=experts, timeout=60),
            settings=Settings(inference="remote", experts_url=experts, cache_max_bytes=0, **settings),
        )
        workspace = Workspace(tmp_path / "c")
        events = list(pipeline.run("edges of edges of edges", workspace=workspace, files=[photo]))
    done = events[-1]
    assert isinstance(done, Done) and done.outcome is Outcome.ANSWERED, done.error
    return done


def received(otlp: OTLPReceiver, at_least: int, timeout: float = 10) -> list[ReceivedSpan]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        telemetry.flush()
        models_local.telemetry.flush()
        if len(otlp.spans) >= at_least:
            break
        time.sleep(0.05)
    return list(otlp.spans)


@pytest.mark.parametrize("streaming", [False, True], ids=["stage-by-stage", "streaming"])
def test_a_request_is_one_trace_from_the_root_to_the_expert_servers_spans(otlp, experts, tmp_path, streaming):
    done = run_request(experts, tmp_path, stream_execution=streaming)
    spans = received(otlp, at_least=1 + 3 + 4 + 3 + 3 * 4)
    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if s.name == "invoke_agent hugginggpt"]
    assert len(roots) == 1 and roots[0].parent_id == ""
    root = roots[0]
    assert {s.trace_id for s in spans} == {root.trace_id}, "every span, the server's too, is in one trace"
    assert root.attributes["hugginggpt.request_id"] == done.trace["request_id"]
    assert root.attributes["hugginggpt.outcome"] == "answered"
    assert root.attributes["gen_ai.usage.input_tokens"] == done.trace["usage"]["input_tokens"] > 0

    def children(parent: ReceivedSpan, name: str | None = None) -> list[ReceivedSpan]:
        return [s for s in spans if s.parent_id == parent.span_id and (name is None or s.name == name)]

    stages = {
        s.attributes["hugginggpt.stage"]: s for s in children(root) if "hugginggpt.stage" in s.attributes
    }
    stages = {k: v for k, v in stages.items() if v.name != "chat fake-llm"}
    # Streaming execution selects models while the plan is written: no select stage of its own, and
    # its call sits under the root.
    assert set(stages) == ({"plan", "execute", "respond"} | (set() if streaming else {"select"}))
    assert (
        stages["plan"].name == "plan hugginggpt"
        and stages["plan"].attributes["gen_ai.operation.name"] == "plan"
    )
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent" and root.kind == "INTERNAL"
    assert root.attributes["gen_ai.provider.name"] == "openai" and not root.error
    stages.setdefault("select", root)

    # LLM calls: CLIENT spans under their stage, with the GenAI attributes; the rejected plan is round 0
    chats = {stage: children(stages[stage], "chat fake-llm") for stage in ("plan", "select", "respond")}
    assert [c.attributes["hugginggpt.correction_round"] for c in chats["plan"]] == [0, 1]
    assert len(chats["select"]) == len(chats["respond"]) == 1
    for call in [c for calls in chats.values() for c in calls]:
        assert call.kind == "CLIENT"
        assert call.attributes["gen_ai.operation.name"] == "chat"
        assert call.attributes["gen_ai.provider.name"] == "openai"
        assert call.attributes["gen_ai.request.model"] == "fake-llm"
        assert call.attributes["gen_ai.response.model"] == "fake"  # as the server named it
        assert call.attributes["gen_ai.response.finish_reasons"] == ["stop"]
        assert call.attributes["server.address"] == "127.0.0.1"
        assert call.attributes["gen_ai.usage.input_tokens"] > 0
        assert call.attributes["gen_ai.usage.output_tokens"] > 0
        assert (
            0
            < call.attributes["hugginggpt.time_to_first_token_s"]
            < (call.end_ns - call.start_ns) / 1e9 + 0.01
        )
        assert stages[call.attributes["hugginggpt.stage"]].start_ns <= call.start_ns < call.end_ns
        assert call.end_ns <= stages[call.attributes["hugginggpt.stage"]].end_ns
        assert "gen_ai.input.messages" not in call.attributes  # prompts only when the operator opts in

    # task attempts: under the execute stage; each call to the expert server a CLIENT span under the
    # attempt, the server's SERVER span under it, with the status code on both sides
    attempts = children(stages["execute"], f"execute_tool {EDGES}")
    assert len(attempts) == 3
    assert len({a.attributes["gen_ai.tool.call.id"] for a in attempts}) == 3
    loads = 0
    for attempt in attempts:
        a = attempt.attributes
        assert (a["hugginggpt.where"], a["hugginggpt.outcome"]) == ("remote", "done")
        assert a["hugginggpt.cached"] is False and a["gen_ai.operation.name"] == "execute_tool"
        assert a["hugginggpt.model"] == "lllyasviel/Annotators" and a["gen_ai.tool.name"] == EDGES
        assert a["hugginggpt.bytes_in"] > 0 and a["hugginggpt.bytes_out"] > 0
        assert "gen_ai.tool.call.arguments" not in a  # content only when the operator opts in
        (hop,) = [s for s in spans if s.parent_id == attempt.span_id]
        assert (
            hop.kind == "CLIENT" and hop.name == "POST" and hop.attributes["http.response.status_code"] == 200
        )
        assert hop.attributes["url.full"].endswith(f"/models/lllyasviel/Annotators/pipeline/{EDGES}")
        (served,) = [s for s in spans if s.parent_id == hop.span_id]
        assert served.service == "hugginggpt-experts" and served.kind == "SERVER"
        assert served.name == "POST /models/{model}/pipeline/{task}"
        assert served.attributes["http.response.status_code"] == 200
        inside = [s for s in spans if by_id.get(s.parent_id) is served]
        assert {"queue wait", "run"} <= {s.name for s in inside}
        for s in [served, *inside]:  # namespaced, with the model's id (not a folder on the server)
            assert s.attributes["hugginggpt.expert.model"] == "lllyasviel/Annotators", s
            assert s.attributes["hugginggpt.expert.task"] == EDGES
            assert not {"model", "task", "device"} & set(s.attributes)
        loads += "load" in {s.name for s in inside}
    assert loads == 1  # loaded once, then resident

    # one conversation, hashed, on every span, the server's too
    conversations = {s.attributes.get("gen_ai.conversation.id") for s in spans}
    assert len(conversations) == 1 and None not in conversations
    assert "c" not in conversations and len(next(iter(conversations))) == 32

    text = json.dumps([s.attributes for s in spans])
    assert KEY not in text and "edges of edges" not in text


def test_prompts_replies_and_tool_content_go_on_spans_only_when_the_operator_opts_in(otlp, experts, tmp_path):
    run_request(experts, tmp_path, trace_content=True)
    spans = received(otlp, at_least=20)
    root = next(s for s in spans if s.name == "invoke_agent hugginggpt")
    assert root.attributes["input.value"] == "edges of edges of edges"
    chats = [s for s in spans if s.name.startswith("chat")]
    respond = next(s for s in chats if s.attributes["hugginggpt.stage"] == "respond")
    # the conventions' `parts` shape (what Phoenix converts), not OpenAI's {"role", "content"}
    (output,) = json.loads(respond.attributes["gen_ai.output.messages"])
    assert output == {
        "role": "assistant",
        "parts": [{"type": "text", "content": "Three edge maps."}],
        "finish_reason": "stop",
    }
    inputs = json.loads(respond.attributes["gen_ai.input.messages"])
    assert all(set(m) == {"role", "parts"} and m["parts"][0]["type"] == "text" for m in inputs)
    assert any("edges of edges" in p["content"] for m in inputs for p in m["parts"])
    tools = [s for s in spans if s.name == f"execute_tool {EDGES}"]
    assert len(tools) == 3
    for tool in tools:
        arguments = json.loads(tool.attributes["gen_ai.tool.call.arguments"])
        result = json.loads(tool.attributes["gen_ai.tool.call.result"])
        assert arguments["image"]["file"].endswith(".png") and "/" not in arguments["image"]["file"]
        assert result["0"]["kind"] == "image" and result["0"]["file"].endswith(".png")
    assert KEY not in json.dumps([s.attributes for s in spans])


def test_llm_calls_are_spans_while_the_request_still_runs(otlp, tmp_path):
    from fakes.endpoints import FakeEndpoint, cards

    with FakeLLMServer() as llm:
        llm.script("plan", '{"tasks": [{"task": "summarization", "id": 0, "args": {"text": "a b c"}}]}')
        llm.script("respond", "Summarized.")
        client = OpenAICompatibleLLM(base_url=llm.url, model="fake-llm", api_key=KEY, max_retries=0)
        catalog = Catalog(cards(("s", "summarization", 1)))
        pipeline = Pipeline(llm=client, catalog=catalog, endpoint=FakeEndpoint(), settings=Settings())
        events = pipeline.run("sum it up", workspace=Workspace(tmp_path / "c"))
        for event in events:
            if isinstance(event, StageStarted) and event.stage == "respond":
                break
        spans = received(otlp, at_least=2)  # the plan's call and its stage, while the run goes on
        assert "chat fake-llm" in {s.name for s in spans}
        assert "invoke_agent hugginggpt" not in {s.name for s in spans}  # the request is not over
        assert isinstance(list(events)[-1], Done)
    spans = received(otlp, at_least=6)
    assert len([s for s in spans if s.name == "chat fake-llm"]) == 2


def test_a_request_that_failed_or_whose_every_task_failed_has_an_error_root(otlp, tmp_path):
    from fakes.endpoints import FakeEndpoint, cards
    from fakes.llm_server import Reply

    plan = {"tasks": [{"task": "summarization", "id": 0, "args": {"text": "a b c"}}]}
    with FakeLLMServer() as llm:
        llm.script("plan", Reply(status=500), json.dumps(plan))
        llm.script("respond", "Nothing worked.")
        client = OpenAICompatibleLLM(base_url=llm.url, model="fake-llm", api_key=KEY, max_retries=0)
        catalog = Catalog(cards(("s", "summarization", 1)))
        endpoint = FakeEndpoint(failing={"s"})
        pipeline = Pipeline(llm=client, catalog=catalog, endpoint=endpoint, settings=Settings())
        failed = list(pipeline.run("sum it up", workspace=Workspace(tmp_path / "a")))[-1]
        all_failed = list(pipeline.run("sum it up", workspace=Workspace(tmp_path / "b")))[-1]
    assert failed.outcome is Outcome.FAILED and all_failed.outcome is Outcome.ANSWERED
    spans = received(otlp, at_least=2 + 3 + 4)
    roots = {s.attributes["hugginggpt.request_id"]: s for s in spans if s.name == "invoke_agent hugginggpt"}
    first, second = roots[failed.request_id], roots[all_failed.request_id]
    assert first.error and first.attributes["error.type"] == "llm"
    (plan_stage,) = [s for s in spans if s.parent_id == first.span_id and s.name == "plan hugginggpt"]
    assert plan_stage.error and plan_stage.end_ns > plan_stage.start_ns  # the stage it failed in
    (call,) = [s for s in spans if s.parent_id == plan_stage.span_id]
    assert call.error and call.attributes["error.type"] == "llm"
    assert second.error and second.attributes["error.type"] == "tasks_failed"


def test_without_otel_variables_nothing_is_traced(tmp_path, monkeypatch):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert not telemetry.configure()
    assert telemetry.tracer() is None and telemetry.inject({}) == {}


def test_a_collector_that_is_down_changes_no_requests_outcome(tmp_path, monkeypatch):
    from fakes.endpoints import FakeEndpoint, cards

    with FakeLLMServer() as llm:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
        assert telemetry.configure()
        llm.script("plan", '{"tasks": [{"task": "summarization", "id": 0, "args": {"text": "a b c"}}]}')
        llm.script("respond", "Summarized.")
        client = OpenAICompatibleLLM(base_url=llm.url, model="fake-llm", api_key=KEY, max_retries=0)
        catalog = Catalog(cards(("s", "summarization", 1)))
        pipeline = Pipeline(llm=client, catalog=catalog, endpoint=FakeEndpoint(), settings=Settings())
        try:
            for i in range(3):
                done = collect(pipeline.run("sum it up", workspace=Workspace(tmp_path / f"c{i}")))
                assert done.outcome is Outcome.ANSWERED and done.answer == "Summarized."
        finally:
            monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
            telemetry.use(None)  # its spans are dropped; nothing waits for the dead collector


def test_the_expert_servers_span_is_a_server_span_with_the_status_code(otlp):
    settings = ServerSettings.from_mapping({"hub": True})
    with protocol_server(create_app(LocalBackend(settings.runtime()), settings.table())) as url:
        caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        headers = {"traceparent": caller, "baggage": "gen_ai.conversation.id=abc123"}
        reply = httpx.post(
            f"{url}/models/x/pipeline/made-up-task", content=b"", headers=headers, trust_env=False
        )
        assert reply.status_code == 404
    (served,) = [s for s in received(otlp, at_least=1) if s.kind == "SERVER"]
    assert served.trace_id == "0af7651916cd43dd8448eb211c80319c" and served.parent_id == "b7ad6b7169203331"
    assert (
        served.attributes["http.response.status_code"] == 404
        and served.attributes["http.request.method"] == "POST"
    )
    assert not served.error  # a client's 4xx is not the server's failure (HTTP conventions)
    assert served.attributes["gen_ai.conversation.id"] == "abc123"
    assert served.attributes["hugginggpt.expert.model"] == "x"


def test_without_trace_content_no_span_status_quotes_the_request(otlp, tmp_path):
    """A plan the LLM never gets right fails the request with the plan's problem, which quotes the
    request's words; with trace content off the root span's status says only the kind of error."""
    with FakeLLMServer() as llm:
        llm.script(
            "plan", '{"tasks": [{"task": "paint my secret garden", "id": 0, "dep": [-1], "args": {}}]}'
        )
        client = OpenAICompatibleLLM(base_url=llm.url, model="fake-llm", api_key=KEY, max_retries=0)
        pipeline = Pipeline(
            llm=client,
            catalog=Catalog([]),
            endpoint=build_endpoint("local"),
            settings=Settings(inference="local", cache_max_bytes=0),
        )
        events = list(pipeline.run("paint my secret garden", workspace=Workspace(tmp_path / "c")))
    done = events[-1]
    assert isinstance(done, Done) and "secret-garden" in (done.error or "")
    spans = received(otlp, at_least=4)
    root = next(s for s in spans if s.name == "invoke_agent hugginggpt")
    assert root.error and "secret" not in root.status_message  # before: the whole error, words and all
    plan = next(s for s in spans if s.name == "plan hugginggpt")  # the stage it failed in
    assert plan.error and all("secret" not in s.status_message for s in spans)
