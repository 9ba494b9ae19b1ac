"""A run's journal and its resume, in process: the journal of a run cut at a point (as a crash
cuts it) is resumed, and what runs again is counted at the endpoint and the fake LLM server.
tests/test_crash_resume.py kills real processes."""

import json

import pytest
from fakes.endpoints import FakeEndpoint, cards
from fakes.llm_server import FakeLLMServer, Reply

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.run.events import Done, Outcome, TaskFinished
from hugginggpt.run.journal import journal_path, read_journal, unfinished
from hugginggpt.run.pipeline import Pipeline
from hugginggpt.run.resume import resume

CATALOG = Catalog(
    cards(
        ("draw-big", "text-to-image", 900),
        ("draw-small", "text-to-image", 500),
        ("caption", "image-to-text", 100),
        ("speak", "text-to-speech", 50),
    )
)
TASKS = [
    {"task": "text-to-image", "id": 0, "dep": [-1], "args": {"text": "a fox"}},
    {"task": "image-to-text", "id": 1, "dep": [0], "args": {"image": "<resource>-0"}},
    {"task": "text-to-speech", "id": 2, "dep": [1], "args": {"text": "<resource>-1"}},
]
PLAN = json.dumps({"tasks": TASKS})
PICK = json.dumps({"0": {"id": "draw-small", "reason": "small is enough"}})


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        s.script("plan", PLAN).script("select", PICK).script("respond", "Here is the fox, told aloud.")
        yield s


def pipeline(server, endpoint, **settings):
    llm = OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="x", timeout=5, max_retries=0)
    return Pipeline(llm=llm, catalog=CATALOG, endpoint=endpoint, settings=Settings(**settings))


def first_run(server, tmp_path, **settings):
    endpoint = FakeEndpoint()
    workspace = Workspace(tmp_path / "conv")
    done = list(pipeline(server, endpoint, **settings).run("draw a fox", workspace=workspace))[-1]
    assert done.outcome is Outcome.ANSWERED
    return done, workspace, journal_path(done.trace_file)


def crash_after(path, keep):
    """The journal as a crash would leave it: the lines before the first one `keep` refuses."""
    lines = path.read_text().splitlines(keepends=True)
    kept = []
    for line in lines:
        if not keep(json.loads(line), kept):
            break
        kept.append(line)
    path.write_text("".join(kept))
    return [json.loads(line) for line in kept]


def finished_count(n):
    return lambda entry, kept: (
        not (entry["e"] in ("finished", "done") and sum('"finished"' in k for k in kept) >= n)
    )


def test_the_journal_holds_the_plan_each_choice_each_end_and_the_calls(server, tmp_path):
    done, workspace, path = first_run(server, tmp_path)
    state = read_journal(path)
    assert state.start["request"] == "draw a fox" and state.start["request_id"] == done.request_id
    assert [t["id"] for t in state.plan] == [0, 1, 2]
    assert state.choices[0]["model"] == "draw-small" and state.choices[2]["model"] == "speak"
    assert sorted(state.finished) == [0, 1, 2]
    image = state.finished[0]["outputs"][0]
    assert len(image["sha256"]) == 64 and (workspace.root / image["path"]).is_file()
    assert [c["stage"] for c in state.calls] == ["plan", "select", "respond"]
    assert state.done["outcome"] == "answered"
    assert unfinished(workspace.root) == []


def test_a_torn_last_line_is_ignored(server, tmp_path):
    _, workspace, path = first_run(server, tmp_path)
    crash_after(path, finished_count(1))
    with open(path, "ab") as f:
        f.write(b'{"e": "finished", "id": 1, "task": "image-to')  # a crash in the middle of a write
    state = read_journal(path)
    assert state.torn and sorted(state.finished) == [0]
    assert [s.request_id for s in unfinished(workspace.root)] == [state.request_id]


def test_resume_runs_no_finished_task_again_and_makes_only_the_answers_call(server, tmp_path):
    first, workspace, path = first_run(server, tmp_path, cache_max_bytes=0)
    crash_after(path, finished_count(1))
    server.requests.clear()
    endpoint = FakeEndpoint()
    events = list(
        resume(pipeline(server, endpoint, cache_max_bytes=0), read_journal(path), workspace=workspace)
    )
    done = events[-1]
    assert isinstance(done, Done) and done.outcome is Outcome.ANSWERED, done.error
    assert [c[1] for c in endpoint.calls] == ["caption", "speak"]  # task 0 came from the journal
    assert server.stages() == ["respond"]
    finished = {e.task_id: e for e in events if isinstance(e, TaskFinished)}
    assert finished[0].resumed and not finished[1].resumed
    assert [r.resumed for r in done.records] == [True, False, False]
    assert done.records[0].outputs == first.records[0].outputs  # the very files, checked by hash
    assert done.trace["resumed_from"] == first.request_id and done.trace["crashes"] == 1
    saved = json.loads(done.trace_file.read_text())
    assert saved["tasks"][0]["resumed"] and saved["usage"] == done.usage.to_json()
    # both attempts' tokens: the first's plan and select calls, and both answers
    assert done.usage.by_stage.keys() == {"plan", "select", "respond"}
    assert done.usage.total_tokens > first.usage.by_stage["respond"]["input_tokens"]
    assert unfinished(workspace.root) == []  # the resumed run finished


def test_a_changed_file_is_made_again(server, tmp_path):
    first, workspace, path = first_run(server, tmp_path, cache_max_bytes=0)
    crash_after(path, finished_count(2))
    first.records[0].outputs[0].path.write_bytes(b"not the picture any more")
    endpoint = FakeEndpoint()
    done = list(
        resume(pipeline(server, endpoint, cache_max_bytes=0), read_journal(path), workspace=workspace)
    )[-1]
    assert done.outcome is Outcome.ANSWERED
    assert [c[1] for c in endpoint.calls] == ["draw-small", "caption", "speak"]


def test_a_plan_cut_mid_stream_is_continued_keeping_its_finished_task(server, tmp_path):
    server.reset()
    server.script("plan", Reply(PLAN, chunk_chars=4, chunk_delay=0.01), PLAN)  # then the continuation
    server.script("select", PICK).script("respond", "Here is the fox, told aloud.")
    _, workspace, path = first_run(server, tmp_path, cache_max_bytes=0)
    kept = crash_after(
        path,
        lambda e, kept: e["e"] not in ("plan", "done") and not (e["e"] == "planned" and e["task"]["id"] == 2),
    )
    assert {e["e"] for e in kept} >= {"planned", "finished"}  # streaming: tasks ran as the plan came
    server.requests.clear()
    endpoint = FakeEndpoint()
    done = list(
        resume(pipeline(server, endpoint, cache_max_bytes=0), read_journal(path), workspace=workspace)
    )[-1]
    assert done.outcome is Outcome.ANSWERED, done.error
    stages = server.stages()
    assert stages.count("plan") == 1 and stages[-1] == "respond"
    continued = server.requests[0]["messages"]
    assert continued[-2]["role"] == "assistant" and '"id": 1' in continued[-2]["content"]
    ran = [c[1] for c in endpoint.calls]
    assert "draw-small" not in ran and "speak" in ran


def test_a_finished_run_is_not_resumed(server, tmp_path):
    _, workspace, path = first_run(server, tmp_path)
    done = list(resume(pipeline(server, FakeEndpoint()), read_journal(path), workspace=workspace))[-1]
    assert done.outcome is Outcome.FAILED and "ended" in done.error


def test_the_resume_command_says_when_there_is_nothing_to_resume(server, tmp_path):
    import io

    from hugginggpt.commands.cli import main

    _, workspace, _ = first_run(server, tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert main(["resume", "--workdir", str(workspace.root)], stdout=out, stderr=err) == 2
    assert "no unfinished run" in err.getvalue()
    assert main(["resume", "--workdir", str(workspace.root), "../x"], stdout=out, stderr=err) == 2
    assert "not a run id" in err.getvalue()


class PictureServer:
    """A loopback HTTP server serving one picture whose bytes the test can change."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.body = b"\x89PNG first picture"
        self.hits = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                owner.hits += 1
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(owner.body)))
                self.end_headers()
                self.wfile.write(owner.body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/fox.png"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_finished_task_with_a_url_argument_is_taken_from_the_journal_while_the_url_serves_the_same_bytes(
    server, tmp_path, monkeypatch
):
    from functools import partial

    from test_trust import only_loopback

    from hugginggpt.files import urlguard

    # the test's picture server is on loopback, which the guard refuses unless told otherwise
    monkeypatch.setattr(urlguard, "fetch", partial(urlguard.fetch, allowed=only_loopback))
    pictures = PictureServer()
    try:
        tasks = [
            {"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": pictures.url}},
            {"task": "text-to-speech", "id": 1, "dep": [0], "args": {"text": "<resource>-0"}},
        ]
        server.reset()
        server.script("plan", json.dumps({"tasks": tasks})).script("respond", "The fox, told aloud.")
        _, workspace, path = first_run(server, tmp_path, cache_max_bytes=0, allow_urls=True)
        crash_after(path, finished_count(1))  # the caption of the fetched picture had finished

        endpoint = FakeEndpoint()
        same = pipeline(server, endpoint, cache_max_bytes=0, allow_urls=True)
        done = list(resume(same, read_journal(path), workspace=workspace))[-1]
        assert done.outcome is Outcome.ANSWERED, done.error
        assert [c[1] for c in endpoint.calls] == ["speak"]  # the caption came from the journal
        assert [r.resumed for r in done.records] == [True, False]

        crash_after(path, finished_count(1))  # the same crash, but the URL now serves other bytes
        pictures.body = b"\x89PNG another picture"
        endpoint = FakeEndpoint()
        other = pipeline(server, endpoint, cache_max_bytes=0, allow_urls=True)
        done = list(resume(other, read_journal(path), workspace=workspace))[-1]
        assert done.outcome is Outcome.ANSWERED, done.error

        assert [c[1] for c in endpoint.calls] == ["caption", "speak"]
    finally:
        pictures.close()
