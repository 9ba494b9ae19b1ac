"""Whole requests through the pipeline: fake LLM server (real openai client), scripted endpoint."""

import json

import pytest
from fakes.endpoints import FakeEndpoint, cards
from fakes.llm_server import FakeLLMServer, Reply
from fakes.serving import serve_in_thread

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.run.events import (
    AnswerDelta,
    Done,
    ModelSelected,
    Outcome,
    PickSource,
    PlanReady,
    PlanRejected,
    StageStarted,
    TaskFinished,
    TaskStarted,
)
from hugginggpt.run.pipeline import Pipeline

CATALOG = Catalog(
    cards(
        ("det-big", "object-detection", 900),
        ("det-small", "object-detection", 500),
        ("cap-only", "image-to-text", 100),
        ("tts-a", "text-to-speech", 50),
    )
)
PLAN = json.dumps(
    {
        "tasks": [
            {"task": "object-detection", "id": 0, "dep": [-1], "args": {"image": "photo.png"}},
            {"task": "image-to-text", "id": 1, "dep": [0], "args": {"image": "<resource>-0"}},
        ]
    }
)


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        yield s


@pytest.fixture
def photo(tmp_path):
    path = tmp_path / "photo.png"
    path.write_bytes(b"\x89PNG fake")
    return path


def pipeline(server, endpoint=None, **settings):
    llm = OpenAICompatibleLLM(
        base_url=server.url, model="fake", api_key="sk-secret-key", timeout=5, max_retries=0
    )
    return Pipeline(
        llm=llm, catalog=CATALOG, endpoint=endpoint or FakeEndpoint(), settings=Settings(**settings)
    )


def run(p, request, tmp_path, files=(), workspace=None):
    workspace = workspace or Workspace(tmp_path / "conv")
    events = list(p.run(request, workspace=workspace, files=files))
    return events, events[-1], workspace


def test_full_request_streams_every_stage_in_order(server, photo, tmp_path):
    server.script("plan", PLAN)
    server.script("select", '{"0": {"id": "det-small", "reason": "smaller and good enough"}}')
    server.script("respond", "I found objects; see outputs.")
    p = pipeline(server, stream_execution=False)  # the stages one after another
    events, done, ws = run(p, "what is in this photo?", tmp_path, files=[photo])

    kinds = [type(e).__name__ for e in events]
    assert kinds[:2] == ["StageStarted", "PlanReady"]
    assert kinds.index("ModelSelected") < kinds.index("TaskStarted") < kinds.index("TaskFinished")
    assert kinds.index("TaskFinished") < kinds.index("AnswerDelta") and kinds[-1] == "Done"
    assert [e.stage for e in events if isinstance(e, StageStarted)] == [
        "plan",
        "select",
        "execute",
        "respond",
    ]

    selected = {e.task_id: e for e in events if isinstance(e, ModelSelected)}
    assert selected[0].model == "det-small" and selected[0].reason == "smaller and good enough"
    assert selected[0].candidates == ["det-big", "det-small"]
    assert selected[1].model == "cap-only" and selected[1].reason == "the only candidate"
    assert (
        "".join(e.text for e in events if isinstance(e, AnswerDelta))
        == done.answer
        == "I found objects; see outputs."
    )
    assert done.error is None
    assert server.stages() == ["plan", "select", "respond"]
    # the respond prompt holds the execution record, with the real output paths
    record = server.requests[-1]["messages"][-1]["content"]
    assert "Task 0 (object-detection) with det-small: done" in record and "image file outputs/" in record


def test_at_most_three_llm_calls_and_two_without_a_choice(server, photo, tmp_path):
    plan = json.dumps(
        {
            "tasks": [
                {"task": "image-to-text", "id": i, "dep": [-1], "args": {"image": "photo.png"}}
                for i in range(6)
            ]
        }
    )
    server.script("plan", plan).script("respond", "ok")
    p = pipeline(server, stream_execution=False)  # streaming_run may add a second selection call
    _, done, _ = run(p, "caption six times", tmp_path, files=[photo])
    assert done.error is None and len(done.trace["llm_calls"]) == 2  # one candidate each: no select call

    server.reset()
    server.script(
        "plan",
        json.dumps(
            {
                "tasks": [
                    {"task": "object-detection", "id": i, "dep": [-1], "args": {"image": "photo.png"}}
                    for i in range(8)
                ]
            }
        ),
    )
    server.script("select", json.dumps({str(i): {"id": "det-big", "reason": "r"} for i in range(8)}))
    server.script("respond", "ok")
    _, done, _ = run(p, "detect eight times", tmp_path, files=[photo])
    assert done.error is None and server.stages() == ["plan", "select", "respond"]
    assert len(done.trace["llm_calls"]) == 3


def test_empty_plan_answers_directly_and_says_so(server, tmp_path):
    server.script("plan", '{"tasks": []}').script("respond", "Hello! I can run models for you.")
    events, done, _ = run(pipeline(server), "hi", tmp_path)
    ready = next(e for e in events if isinstance(e, PlanReady))
    assert ready.plan.tasks == [] and done.answer.startswith("Hello")
    assert server.stages() == ["plan", "respond"]
    assert "No model was needed" in server.requests[-1]["messages"][-1]["content"]


def test_pick_that_is_not_a_candidate_is_replaced_and_recorded(server, photo, tmp_path):
    server.script("plan", PLAN).script("select", '{"0": {"id": "made/up-model", "reason": "best"}}')
    server.script("respond", "ok")
    events, done, _ = run(pipeline(server), "detect", tmp_path, files=[photo])
    pick = next(e for e in events if isinstance(e, ModelSelected) and e.task_id == 0)
    assert (
        pick.model == "det-big"
        and pick.source is PickSource.NOT_A_CANDIDATE
        and "made/up-model" in pick.reason
    )
    assert done.trace["choices"]["0"]["substituted"] is True
    assert done.trace["choices"]["0"]["source"] == "not_a_candidate"


def test_the_selection_prompt_lists_each_candidate_with_one_list_marker(server, photo, tmp_path):
    server.script("plan", PLAN).script("select", '{"0": {"id": "det-big", "reason": "best"}}')
    server.script("respond", "ok")
    run(pipeline(server), "detect", tmp_path, files=[photo])
    [asked] = [r for r in server.requests if "Candidates:" in r["messages"][-1]["content"]]
    lines = asked["messages"][-1]["content"].splitlines()
    candidates = [line for line in lines if '"det-' in line]
    assert candidates and all(line.startswith('- "det-') for line in candidates), candidates


def test_a_failed_selection_call_is_recorded_as_such_not_as_a_bad_pick(server, photo, tmp_path):
    server.script("plan", PLAN).script("select", Reply("overloaded", status=500)).script("respond", "ok")
    events, done, _ = run(pipeline(server), "detect", tmp_path, files=[photo])
    pick = next(e for e in events if isinstance(e, ModelSelected) and e.task_id == 0)
    assert pick.model == "det-big" and pick.source is PickSource.SELECTION_FAILED
    assert "model selection failed" in pick.reason and "HTTP 500" in pick.reason
    assert done.ok and done.trace["choices"]["0"]["source"] == "selection_failed"


def test_rejected_plans_are_visible_then_corrected(server, photo, tmp_path):
    server.script(
        "plan", '[{"task": "object-detection", "id": 0, "dep": [-1], "args": {"image": "other.png"}}]', PLAN
    )
    server.script("select", "{}").script("respond", "ok")
    events, done, _ = run(pipeline(server), "detect", tmp_path, files=[photo])
    rejected = [e for e in events if isinstance(e, PlanRejected)]
    assert len(rejected) == 1 and "other.png" in rejected[0].problems[0]
    assert done.error is None and done.trace["plan_attempts"] == 2


def test_plan_that_stays_invalid_ends_in_a_clear_error(server, tmp_path):
    server.script("plan", '[{"task": "teleportation", "id": 0, "dep": [-1], "args": {}}]')
    events, done, _ = run(pipeline(server), "teleport me", tmp_path)
    assert done.error.startswith("I could not make a valid plan") and "teleportation" in done.error
    assert not any(isinstance(e, TaskStarted) for e in events)
    assert server.stages() == ["plan"] * 3


def test_llm_down_ends_in_an_error_naming_the_endpoint(tmp_path):
    llm = OpenAICompatibleLLM(
        base_url="http://127.0.0.1:9/v1", model="m", api_key="k", timeout=2, max_retries=0
    )
    p = Pipeline(llm=llm, catalog=CATALOG, endpoint=FakeEndpoint())
    events = list(p.run("hi", workspace=Workspace(tmp_path / "c")))
    assert (
        isinstance(events[-1], Done)
        and "127.0.0.1:9" in events[-1].error
        and "could not be reached" in events[-1].error
    )


def test_trace_is_saved_and_holds_prompts_replies_timings_and_tokens_but_no_key(server, photo, tmp_path):
    server.script("plan", PLAN).script("select", "{}").script("respond", "done")
    _, done, ws = run(pipeline(server), "detect", tmp_path, files=[photo])
    saved = (ws.root / "traces" / f"{done.trace['request_id']}.json").read_text()
    assert "sk-secret-key" not in saved
    trace = json.loads(saved)
    assert [c["stage"] for c in trace["llm_calls"]] == ["plan", "select", "respond"]
    assert trace["llm_calls"][0]["messages"][0]["content"].startswith("# Stage: plan")
    assert trace["llm_calls"][0]["reply"] == PLAN
    assert trace["plan"][1]["args"] == {"image": "<resource>-0"}
    assert set(trace["timings"]) == {"plan", "select", "execute", "respond", "total"}
    assert trace["tokens"]["prompt"] > 0 and trace["tokens"]["completion"] > 0
    assert [t["status"] for t in trace["tasks"]] == ["done", "done"]


def test_answer_naming_a_file_that_does_not_exist_gets_a_note(server, photo, tmp_path):
    server.script("plan", PLAN).script("select", "{}").script("respond", "Here it is: outputs/x/ghost.png")
    _, done, _ = run(pipeline(server), "detect", tmp_path, files=[photo])
    assert "ghost.png named above does not exist" in done.answer


def test_conversations_do_not_see_each_others_files(server, photo, tmp_path):
    server.script("plan", PLAN).script("select", "{}").script("respond", "ok")
    _, _, first = run(
        pipeline(server), "detect", tmp_path, files=[photo], workspace=Workspace(tmp_path / "a")
    )
    server.reset()
    server.script("plan", PLAN).script("respond", "ok")
    _, done, second = run(pipeline(server), "detect", tmp_path, workspace=Workspace(tmp_path / "b"))
    assert "photo.png" not in server.requests[0]["messages"][-1]["content"]
    assert done.error and "photo.png" in done.error  # the plan named a file this conversation lacks


def test_earlier_outputs_can_be_used_later_in_the_conversation(server, photo, tmp_path):
    server.script("plan", PLAN).script("select", "{}").script("respond", "ok")
    ws = Workspace(tmp_path / "conv")
    _, done, _ = run(pipeline(server), "detect", tmp_path, files=[photo], workspace=ws)
    made = next(o["path"] for o in done.trace["tasks"][0]["outputs"] if o["kind"] == "image")
    server.reset()
    server.script(
        "plan",
        json.dumps({"tasks": [{"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": made}}]}),
    )
    server.script("respond", "ok")
    endpoint = FakeEndpoint()
    _, done, _ = run(pipeline(server, endpoint), "caption the boxes", tmp_path, workspace=ws)
    assert done.error is None and endpoint.calls[0][2]["image"] == ws.root / made
    assert made in server.requests[0]["messages"][-1]["content"]


def test_no_model_for_a_task_fails_it_and_the_answer_says_why(server, tmp_path):
    server.script(
        "plan", '{"tasks": [{"task": "text-to-video", "id": 0, "dep": [-1], "args": {"text": "a cat"}}]}'
    )
    server.script("respond", "Sorry, no video model is available.")
    events, done, _ = run(pipeline(server), "make a video", tmp_path)
    assert done.trace["tasks"][0]["status"] == "failed"
    assert "no model in the catalog can run text-to-video" in server.requests[-1]["messages"][-1]["content"]


def test_unrunnable_candidates_are_not_offered(server, photo, tmp_path):
    server.script("plan", PLAN).script("respond", "ok")
    events, done, _ = run(
        pipeline(server, FakeEndpoint(unrunnable={"det-big"})), "detect", tmp_path, files=[photo]
    )
    pick = next(e for e in events if isinstance(e, ModelSelected) and e.task_id == 0)
    assert pick.model == "det-small" and pick.candidates == ["det-small"]
    assert server.stages() == ["plan", "respond"]


def test_respond_stream_failure_is_an_error_event(server, photo, tmp_path):
    server.script("plan", PLAN).script("select", "{}").script("respond", Reply("overloaded", status=503))
    _, done, _ = run(pipeline(server), "detect", tmp_path, files=[photo])
    assert done.error and "HTTP 503" in done.error
    assert [t["status"] for t in done.trace["tasks"]] == ["done", "done"]


def test_stream_of_finished_tasks_carries_their_files(server, photo, tmp_path):
    server.script("plan", PLAN).script("select", "{}").script("respond", "ok")
    events, _, ws = run(pipeline(server), "detect", tmp_path, files=[photo])
    finished = [e for e in events if isinstance(e, TaskFinished)]
    image = next(a for a in finished[0].outputs if a.kind == "image")
    assert image.path.is_file() and ws.root in image.path.parents


def test_url_arguments_are_refused_when_fetching_is_off_and_guarded_when_on(server, tmp_path):
    plan = json.dumps(
        {
            "tasks": [
                {
                    "task": "image-to-text",
                    "id": 0,
                    "dep": [-1],
                    "args": {"image": "http://127.0.0.1:9/cat.png"},
                }
            ]
        }
    )
    server.script("plan", plan)
    _, done, _ = run(pipeline(server), "caption this URL", tmp_path)
    assert "fetching URLs is turned off" in done.error

    server.reset()
    server.script("plan", plan).script("respond", "could not fetch")
    endpoint = FakeEndpoint()
    _, done, _ = run(pipeline(server, endpoint, allow_urls=True), "caption this URL", tmp_path)
    assert (
        done.trace["tasks"][0]["status"] == "failed" and "private or local" in done.trace["tasks"][0]["error"]
    )
    assert endpoint.calls == []


def test_concurrent_requests_keep_their_own_llm_calls(server, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    server.responder = lambda stage, body: (
        '{"tasks": []}' if stage == "plan" else "answer to " + body["messages"][-1]["content"].split("\n")[0]
    )
    p = pipeline(server)

    def ask(i):
        events = list(p.run(f"question {i}", workspace=Workspace(tmp_path / f"c{i}")))
        return i, events[-1]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(ask, range(8)))
    for i, done in results:
        assert done.answer == f"answer to Request: question {i}"
        prompts = [c["messages"][-1]["content"] for c in done.trace["llm_calls"]]
        assert len(prompts) == 2 and all(f"question {i}" in m for m in prompts)
    assert p.llm.calls == []  # the shared LLM keeps no log that would grow with every request


def test_stop_during_planning_makes_no_further_llm_call(server, photo, tmp_path):
    import threading

    server.script("plan", PLAN).script("select", "{}").script("respond", "ok")
    cancelled = threading.Event()
    events = []
    for event in pipeline(server, stream_execution=False).run(
        "detect", workspace=Workspace(tmp_path / "c"), files=[photo], cancelled=cancelled
    ):
        events.append(event)
        if isinstance(event, PlanReady):
            cancelled.set()  # the person pressed Stop while the plan was being made
    assert events[-1].outcome is Outcome.CANCELLED and events[-1].error is None
    assert server.stages() == ["plan"]
    assert not any(isinstance(e, (ModelSelected, TaskStarted, AnswerDelta)) for e in events)


def test_the_answer_prompt_keeps_history_within_the_budget_too(server, tmp_path):
    server.script("plan", '{"tasks": []}').script("respond", "ok")
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * 400}
        for i in range(200)
    ]  # a long conversation: about 100 k tokens
    p = pipeline(server, history_tokens=1500)
    events = list(p.run("and now?", workspace=Workspace(tmp_path / "c"), history=history))
    assert events[-1].error is None
    plan_request, respond_request = server.requests
    for body in (plan_request, respond_request):
        text = " ".join(m["content"] for m in body["messages"])
        assert "turn 199" in text and "turn 0 " not in text
        assert (
            sum(len(m["content"]) for m in body["messages"] if m["content"].startswith("turn ")) // 4 <= 1500
        )


def test_a_server_that_echoes_the_api_key_in_its_error_never_gets_it_into_chat_or_trace(server, tmp_path):
    server.script("plan", Reply("invalid token sk-secret-key for this route", status=403))
    _, done, _ = run(pipeline(server), "hi", tmp_path)
    assert "HTTP 403" in done.error and "invalid token" in done.error
    trace_text = done.trace_file.read_text()
    assert "sk-secret-key" not in done.error + json.dumps(done.trace, default=str) + trace_text


def test_a_pick_with_a_null_reason_is_not_shown_as_none(server, photo, tmp_path):
    server.script("plan", PLAN).script("select", '{"0": {"id": "det-small", "reason": null}}').script(
        "respond", "ok"
    )
    events, _, _ = run(pipeline(server), "detect", tmp_path, files=[photo])
    pick = next(e for e in events if isinstance(e, ModelSelected) and e.task_id == 0)
    assert pick.model == "det-small" and pick.reason == "chosen by the LLM"


def test_a_web_address_in_the_answer_is_not_called_a_missing_file(server, photo, tmp_path):
    from hugginggpt.stages.respond import missing_files

    ws = Workspace(tmp_path / "c")
    answer = "The picture at https://example.com/pets/cat.png shows a cat; outputs/x/ghost.png was not made."
    assert missing_files(answer, ws) == ["outputs/x/ghost.png"]


def test_a_base_url_that_answers_with_a_web_page_is_a_clear_llm_error(tmp_path):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from hugginggpt.llms.interface import LLMError

    class WebPage(BaseHTTPRequestHandler):  # e.g. a chat UI's address typed instead of its API's
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = b"<html><body>Welcome</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), WebPage)
    serve_in_thread(httpd)
    try:
        llm = OpenAICompatibleLLM(
            base_url=f"http://127.0.0.1:{httpd.server_port}", model="m", api_key="k", timeout=5, max_retries=0
        )
        done = list(
            Pipeline(llm=llm, catalog=CATALOG, endpoint=FakeEndpoint()).run(
                "hi", workspace=Workspace(tmp_path / "c")
            )
        )[-1]
        assert done.error.startswith("The LLM m at") and "OpenAI-compatible" in done.error
        with pytest.raises(LLMError, match="OpenAI-compatible"):
            list(llm.stream([{"role": "user", "content": "hi"}], stage="respond"))
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_closing_the_answer_stream_hangs_up_on_the_server(server):
    import time

    server.script("respond", Reply("word " * 400, chunk_delay=0.005))
    llm = OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="k", timeout=5, max_retries=0)
    stream = llm.stream(
        [{"role": "system", "content": "# Stage: respond"}, {"role": "user", "content": "x"}], stage="respond"
    )
    next(stream)
    stream.close()  # Stop pressed: a paid server must stop generating, not stream to nobody
    deadline = time.monotonic() + 3
    while server.dropped_streams == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.dropped_streams == 1


def test_a_password_in_the_base_url_stays_out_of_errors_and_traces(tmp_path):
    llm = OpenAICompatibleLLM(
        base_url="http://user:pw-secret@127.0.0.1:9/v1", model="m", timeout=2, max_retries=0
    )
    done = list(
        Pipeline(llm=llm, catalog=CATALOG, endpoint=FakeEndpoint()).run(
            "hi", workspace=Workspace(tmp_path / "c")
        )
    )[-1]
    assert "could not be reached" in done.error and "127.0.0.1:9" in done.error
    assert "pw-secret" not in done.error + json.dumps(done.trace, default=str) + llm.describe()


@pytest.mark.parametrize(
    "reply",
    [
        '<think>det-big {bigger} or det-small?</think>\n{"0": {"id": "det-small", "reason": "smaller"}}',
        'Here you go: {"0": {"id": "det-small", "reason": "smaller"}} (I weighed {size, speed}).',
    ],
)
def test_a_selection_with_thoughts_or_prose_around_it_is_still_read(server, photo, tmp_path, reply):
    server.script("plan", PLAN).script("select", reply).script("respond", "ok")
    events, _, _ = run(pipeline(server), "detect", tmp_path, files=[photo])
    pick = next(e for e in events if isinstance(e, ModelSelected) and e.task_id == 0)
    assert (pick.model, pick.reason, pick.source) == ("det-small", "smaller", PickSource.LLM)
