"""Traces as Arize Phoenix reads them: a real `phoenix serve` on 127.0.0.1 takes the OTLP/HTTP export of
a request whose every task fails and of one that succeeds (content on), and its own REST API
(GET /v1/projects/<project>/spans) gives the spans back as Phoenix converted them.

Optional: arize-phoenix is not a project requirement (about 850 MB and 1-2 minutes to install in a venv
of its own, and up to a minute to start on a busy 2-core machine). Set HUGGINGGPT_PHOENIX to the
`phoenix` executable of such a venv (or have `phoenix` on PATH); skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fakes.endpoints import FakeEndpoint, cards
from fakes.llm_server import FakeLLMServer

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.observability import telemetry
from hugginggpt.run.events import Done, StageStarted
from hugginggpt.run.pipeline import Pipeline

PROJECT = "hugginggpt-test"
PLAN = '{"tasks": [{"task": "summarization", "id": 0, "args": {"text": "a b c"}}]}'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    binary = os.environ.get("HUGGINGGPT_PHOENIX") or shutil.which("phoenix")
    if not binary:
        pytest.skip("arize-phoenix is not installed (set HUGGINGGPT_PHOENIX to its `phoenix` executable)")
    folder = tmp_path_factory.mktemp("phoenix")
    port, grpc = free_port(), free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(folder),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
    }
    log = (folder / "phoenix.log").open("wb")
    process = subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 180
        while time.monotonic() < end:
            try:
                if httpx.get(f"{url}/healthz", trust_env=False, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, (folder / "phoenix.log").read_text()[-2000:]
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        process.wait(20)


def spans_of(
    url: str, enough: Callable[[list[dict[str, Any]]], bool], timeout: float = 30
) -> list[dict[str, Any]]:
    end, spans = time.monotonic() + timeout, []
    while time.monotonic() < end:
        telemetry.flush()
        reply = httpx.get(f"{url}/v1/projects/{PROJECT}/spans", params={"limit": 500}, trust_env=False)
        spans = reply.json().get("data", []) if reply.status_code == 200 else []
        if enough(spans):
            break
        time.sleep(0.3)
    return spans


def kinds(spans: list[dict[str, Any]], session: str) -> set[str]:
    return {s["span_kind"] for s in spans if s["attributes"].get("session.id") == session}


def test_phoenix_reads_llm_tool_and_agent_spans_sessions_and_errors(phoenix, tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"openinference.project.name={PROJECT}")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    assert telemetry.configure()
    try:
        with FakeLLMServer() as llm:
            llm.script("plan", PLAN, PLAN)
            llm.script("respond", "Nothing could be summarized.", "Summarized.")
            client = OpenAICompatibleLLM(
                base_url=llm.url, model="fake-llm", api_key="sk-secret", max_retries=0
            )
            catalog = Catalog(cards(("s", "summarization", 1)))
            settings = Settings(trace_content=True)
            failing = Pipeline(
                llm=client, catalog=catalog, endpoint=FakeEndpoint(failing={"s"}), settings=settings
            )
            failed = list(failing.run("sum it up", workspace=Workspace(tmp_path / "a")))[-1]
            working = Pipeline(llm=client, catalog=catalog, endpoint=FakeEndpoint(), settings=settings)
            events = working.run("sum it up", workspace=Workspace(tmp_path / "b"))
            for event in events:  # T7: the plan's LLM call is in Phoenix while the request still runs
                if isinstance(event, StageStarted) and event.stage == "respond":
                    break
            session = telemetry.conversation_id("b")
            running = spans_of(phoenix, lambda spans: "LLM" in kinds(spans, session))
            assert "LLM" in kinds(running, session) and "AGENT" not in kinds(running, session)
            done = list(events)[-1]
        assert isinstance(failed, Done) and isinstance(done, Done)
        spans = spans_of(phoenix, lambda spans: sum(s["span_kind"] == "AGENT" for s in spans) == 2)
    finally:
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
        telemetry.configure()

    roots = {
        s["attributes"]["hugginggpt.request_id"]: s for s in spans if s["name"] == "invoke_agent hugginggpt"
    }
    first, second = roots[failed.request_id], roots[done.request_id]
    assert first["span_kind"] == second["span_kind"] == "AGENT"
    assert first["status_code"] == "ERROR" and second["status_code"] != "ERROR"  # T8
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by_trace.setdefault(s["context"]["trace_id"], []).append(s)
    sessions = set()
    for trace in by_trace.values():  # T2: Phoenix's session is the hashed conversation, on every span
        ids = {s["attributes"].get("session.id") for s in trace}
        assert len(ids) == 1 and None not in ids
        sessions |= ids
    assert len(sessions) == 2
    llms = [s for s in spans if s["span_kind"] == "LLM"]
    assert len(llms) == 4
    for s in llms:  # T1, T3: messages Phoenix could read, the provider, the finish reason
        a = s["attributes"]
        assert a["llm.provider"] == "openai" and a["gen_ai.response.model"] == "fake"
        assert a["llm.input_messages.0.message.role"] and a["llm.input_messages.0.message.content"]
        assert a["llm.output_messages.0.message.content"] and a["llm.finish_reason"] == "stop"
    tools = [s for s in spans if s["span_kind"] == "TOOL"]
    assert tools and all(json.loads(s["attributes"]["gen_ai.tool.call.arguments"]) for s in tools)  # T6
    assert {s["name"] for s in spans} >= {"plan hugginggpt", "hugginggpt.execute", "hugginggpt.respond"}
    assert "sk-secret" not in json.dumps(spans)
