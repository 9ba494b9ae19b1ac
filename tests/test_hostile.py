"""Hostile LLM servers, plans, models and inputs end in clear errors and bounded work (issue 15)."""

import json
import os
import threading
import time

import pytest
from fakes.endpoints import FakeEndpoint, cards
from fakes.llm_server import FakeLLMServer, Reply

from hugginggpt.catalog import Catalog
from hugginggpt.commands.terminal import result_json
from hugginggpt.config import Settings
from hugginggpt.endpoints import Result
from hugginggpt.files.artifacts import Artifact
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.interface import LLMError, LLMLimits
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.run.events import Done, ErrorKind, Outcome, TaskSkipped
from hugginggpt.run.pipeline import Pipeline
from hugginggpt.run.records import TaskStatus
from hugginggpt.run.steps import collect, drain
from hugginggpt.run.task_graph import execute_steps
from hugginggpt.stages.execute import RunContext
from hugginggpt.stages.plan import Plan, Task
from hugginggpt.stages.respond import missing_files
from hugginggpt.stages.selection import Choice

CATALOG = Catalog(cards(("tts", "text-to-speech", 10), ("sum", "summarization", 10)))
TTS_PLAN = '{"tasks": [{"task": "text-to-speech", "id": 0, "dep": [-1], "args": {"text": "%s"}}]}'


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        yield s


def llm(server, **limits):
    return OpenAICompatibleLLM(
        base_url=server.url, model="m", api_key="k", timeout=5, max_retries=0, limits=LLMLimits(**limits)
    )


def run(server, request="read it aloud", *, endpoint=None, tmp_path, **settings) -> Done:
    p = Pipeline(
        llm=llm(server),
        catalog=CATALOG,
        endpoint=endpoint or FakeEndpoint(),
        settings=Settings(workdir=str(tmp_path), **settings),
    )
    events = list(p.run(request, workspace=Workspace(tmp_path / "conv")))
    assert isinstance(events[-1], Done)
    return events[-1]


def test_a_json_body_that_is_not_json_is_a_clear_llm_error(server, tmp_path):
    server.script("plan", Reply(raw="<html><body>502 Bad Gateway</body></html>"))
    done = run(server, tmp_path=tmp_path)
    assert done.outcome is Outcome.FAILED and done.error_kind is ErrorKind.LLM
    assert "did not answer like an OpenAI-compatible API" in done.error and "127.0.0.1" in done.error


def test_deeply_nested_selection_reply_means_top_ranked_models_not_a_crash(server, tmp_path):
    plan = '{"tasks": [{"task": "summarization", "id": 0, "dep": [-1], "args": {"text": "x"}}]}'
    catalog = Catalog(cards(("sum-a", "summarization", 10), ("sum-b", "summarization", 5)))
    server.script("plan", plan).script("select", "{" * 20_000).script("respond", "ok")
    p = Pipeline(llm=llm(server), catalog=catalog, endpoint=FakeEndpoint(), settings=Settings())
    done = collect(p.run("sum", workspace=Workspace(tmp_path / "c")))
    assert done.ok and done.trace["choices"]["0"]["source"] == "not_a_candidate"


def test_a_long_chain_whose_first_task_fails_skips_the_rest_without_recursion(tmp_path):
    n = 1500
    plan = Plan([Task(0, "summarization", [], {"text": "x"})])
    plan.tasks += [Task(i, "summarization", [i - 1], {"text": f"<resource>-{i - 1}"}) for i in range(1, n)]
    choices = {t.id: Choice(t.id, t.task, None, "no model here") for t in plan.tasks}
    workspace = Workspace(tmp_path / "c")
    stream = execute_steps(plan, choices, RunContext(FakeEndpoint(), workspace, workspace.run_dir("r")))
    events: list = []
    records = drain(stream, events.append)
    assert sum(isinstance(e, TaskSkipped) for e in events) == n - 1 and records[0].status is TaskStatus.FAILED
    assert all(r.status is TaskStatus.SKIPPED for r in records[1:])


def test_a_link_planted_in_outputs_is_ignored_not_a_crash(server, tmp_path):
    outside = tmp_path / "secret.png"
    outside.write_bytes(b"not yours")
    ws = Workspace(tmp_path / "conv")
    (ws.root / "outputs" / "r1").mkdir(parents=True)
    os.symlink(outside, ws.root / "outputs" / "r1" / "planted.png")
    assert "outputs/r1/planted.png" not in ws.files()
    server.script("plan", '{"tasks": []}').script("respond", "nothing to do")
    done = run(server, "hello", tmp_path=tmp_path)
    assert done.ok


def test_a_huge_text_argument_is_refused_before_the_model_runs(server, tmp_path):
    endpoint = FakeEndpoint()
    server.script("plan", TTS_PLAN % ("word " * 4000)).script("respond", "sorry")
    done = run(server, endpoint=endpoint, tmp_path=tmp_path, max_text_arg_chars=5000)
    [record] = done.records
    assert record.status is TaskStatus.FAILED and "20,000 characters long; at most 5,000" in record.error
    assert endpoint.calls == []


def test_a_huge_model_output_is_cut_in_the_record_trace_and_json(server, tmp_path):
    class Chatty(FakeEndpoint):
        def run(self, task, model, inputs, call):
            return Result(outputs=[Artifact("text", value="blah " * 200_000)], answered_by=self.name)

    plan = '{"tasks": [{"task": "summarization", "id": 0, "dep": [-1], "args": {"text": "x"}}]}'
    server.script("plan", plan).script("respond", "done")
    done = run(server, "sum", endpoint=Chatty(), tmp_path=tmp_path, max_output_chars=1000)
    [output] = done.records[0].outputs
    assert len(output.value) < 1100 and "characters of the model's output cut" in output.value
    assert len(json.dumps(result_json(done))) < 20_000
    assert done.trace_file.stat().st_size < 100_000


def test_the_file_name_check_of_the_answer_is_linear(tmp_path):
    ws = Workspace(tmp_path / "c")
    blob = "QUJD" * 250_000  # a base64 blob: a million letters with no extension
    started = time.perf_counter()
    assert missing_files(blob + " and made/up.png", ws) == []  # past the checked length
    assert missing_files("see made/up.png " + blob, ws) == ["made/up.png"]
    assert time.perf_counter() - started < 5  # was minutes (quadratic); bench/hostile_input.py has numbers


def test_a_trickling_server_is_cut_off_at_the_call_limit(server):
    server.script("chat", Reply("word " * 100, chunk_delay=0.1))
    started = time.perf_counter()
    with pytest.raises(LLMError, match="did not finish its reply within 0.5 s"):
        llm(server, max_seconds=0.5).complete([{"role": "user", "content": "hi"}], stage="plan")
    assert time.perf_counter() - started < 3


def test_an_answer_stream_that_ends_without_a_finish_is_marked_incomplete(server, tmp_path):
    server.script("plan", '{"tasks": []}').script(
        "respond", Reply("one two three four five six", end_after=3)
    )
    done = run(server, "hello", tmp_path=tmp_path)
    assert done.ok and done.answer == "one two three "
    assert "ended before the server finished" in done.incomplete
    assert json.loads(done.trace_file.read_text())["answer_incomplete"] == done.incomplete
    assert result_json(done)["answer_incomplete"] == done.incomplete


def test_a_connection_reset_mid_answer_keeps_the_partial_answer(server, tmp_path):
    server.script("plan", '{"tasks": []}').script(
        "respond", Reply("one two three four five six", reset_after=2)
    )
    done = run(server, "hello", tmp_path=tmp_path)
    assert done.answer == "one two " and "connection to the LLM broke" in done.incomplete


def test_the_trace_is_written_as_the_run_goes(server, tmp_path):
    server.script("plan", '{"tasks": []}').script("respond", Reply("slow answer", delay=1.0))
    p = Pipeline(llm=llm(server), catalog=CATALOG, endpoint=FakeEndpoint(), settings=Settings())
    ws = Workspace(tmp_path / "c")
    seen = []

    def look():
        time.sleep(0.5)  # planned, now waiting for the answer: as if the process were killed here
        seen.extend(json.loads(p.read_text()) for p in (ws.root / "traces").glob("*.json"))

    watcher = threading.Thread(target=look)
    watcher.start()
    list(p.run("hello", workspace=ws))
    watcher.join()
    assert seen and seen[0]["outcome"] == "running" and seen[0]["plan"] == []


def test_a_request_over_the_length_limit_is_refused_without_an_llm_call(server, tmp_path):
    done = run(server, "x" * 30_000, tmp_path=tmp_path, max_request_chars=20_000)
    assert done.error_kind is ErrorKind.INPUT and "30,000 characters" in done.error
    assert server.requests == []


def test_a_request_past_its_time_is_stopped_with_a_clear_error(server, tmp_path):
    server.script("plan", Reply('{"tasks": []}', delay=0.2)).script(
        "respond", Reply("late " * 50, chunk_delay=0.05)
    )
    started = time.perf_counter()
    done = run(server, "hello", tmp_path=tmp_path, request_seconds=0.6)
    assert done.outcome is Outcome.FAILED and done.error_kind is ErrorKind.LIMIT
    assert "longer than its limit of 0.6 s" in done.error
    assert time.perf_counter() - started < 3


def test_budgets_are_settings_with_clear_errors():
    with pytest.raises(ValueError, match="budget"):
        Settings(max_plan_tasks=0)
    assert Settings().max_plan_tasks == 30 and Settings().request_seconds == 900
