"""The evaluation harness end to end: the real openai client against the fake LLM server on
127.0.0.1, predictions as JSON Lines, resume after a limit and after a kill, report, comparison."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer, Reply

from hugginggpt.eval.__main__ import main
from hugginggpt.eval.convert import taskbench_to_plan
from hugginggpt.eval.data import load_dataset

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "fixtures" / "taskbench"
DATASET = load_dataset(DATA)
REQUESTS = {s.id: s.request for s in DATASET.samples}
IDS = list(REQUESTS)


def t(i, task, args, dep=(-1,)):
    return {"task": task, "id": i, "dep": list(dep), "args": args}


def plan(*tasks):
    return json.dumps({"tasks": list(tasks)})


LIGHTHOUSE = "a lighthouse on a cliff at sunset"
# Model "poor": per id, the reply to each attempt (the last one repeats).
POOR = {
    "10000001": [plan(t(0, "image-classification", {"image": "example.jpg"}))],
    "10000002": [plan(t(0, "translation", {"text": "Good morning, how are you?"}))],
    "10000003": [plan(t(0, "image-to-image", {"image": "example.jpg", "text": "make the sky purple"}))],
    "10000004": [  # names an argument wrongly first, fixes it when told
        plan(
            t(0, "automatic-speech-recognition", {"recording": "example.wav"}),
            t(1, "summarization", {"text": "<resource>-0"}, dep=[0]),
        ),
        plan(
            t(0, "automatic-speech-recognition", {"audio": "example.wav"}),
            t(1, "summarization", {"text": "<resource>-0"}, dep=[0]),
        ),
    ],
    "10000005": [
        plan(
            t(0, "text-to-image", {"text": LIGHTHOUSE}),  # leaves out text-to-speech
            t(1, "image-to-text", {"image": "<resource>-0"}, dep=[0]),
        )
    ],
    "10000006": [plan(t(0, "audio-magic", {"audio": "example.wav"}))],  # never a valid plan
    "10000007": [
        plan(
            t(0, "depth-estimation", {"image": "example.jpg"}),
            t(1, "image-segmentation", {"image": "example.jpg"}),
            t(2, "image-classification", {"image": "<resource>-1"}, dep=[1]),
            t(3, "text-to-speech", {"text": "<resource>-2"}, dep=[2]),
        )
    ],
    "10000008": [
        plan(
            t(0, "image-to-image", {"image": "example.png"}),  # gold says "image: example.png"
            t(1, "image-to-text", {"image": "<resource>-0"}, dep=[0]),
        )
    ],
}


# Model "good": the gold itself, written as our plans.
def plan_as_text(plan) -> str:
    return json.dumps({"tasks": plan.to_json()})


GOOD = {s.id: [plan_as_text(taskbench_to_plan(s.nodes, DATASET.tools))] for s in DATASET.samples}


def request_id(body) -> tuple[str | None, int]:
    """Which sample a planning request is for, and its attempt number (1 + corrections so far)."""
    messages = body["messages"]
    for index, message in enumerate(messages):
        if message["role"] == "user":
            for sample_id, text in REQUESTS.items():
                if text in message["content"]:
                    return sample_id, 1 + (len(messages) - index - 1) // 2
    return None, 0


def responder(fail_ids=()):
    def respond(stage, body):
        sample_id, attempt = request_id(body)
        if sample_id in fail_ids:
            return Reply("the backend is down", status=500)
        replies = (GOOD if body["model"] == "good" else POOR)[sample_id]
        return replies[min(attempt, len(replies)) - 1]

    return respond


def asked(fake, since=0) -> Counter:
    return Counter(request_id(r)[0] for r in fake.requests[since:])


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def cli_args(fake, out, *extra, model="poor"):
    return [
        "--data",
        str(DATA),
        "--out",
        str(out),
        "--llm-base-url",
        fake.url,
        "--llm-model",
        model,
        "--llm-api-key",
        "x",
        "--no-progress",
        *extra,
    ]


def run(fake, out, *extra, model="poor"):
    return main(cli_args(fake, out, *extra, model=model))


@pytest.fixture(autouse=True)
def no_client_retries(monkeypatch):
    monkeypatch.setenv("HUGGINGGPT_LLM_MAX_RETRIES", "0")  # a 500 fails at once, no back-off


def test_run_resumes_after_a_limit_and_scores_by_hand(tmp_path):
    out = tmp_path / "poor"
    with FakeLLMServer() as fake:
        fake.responder = responder()
        assert run(fake, out, "--limit", "3") == 0
        assert [r["id"] for r in records(out)] == IDS[:3]
        first = len(fake.requests)
        assert set(asked(fake)) == set(IDS[:3])

        assert run(fake, out) == 0
        again = asked(fake, first)
        assert set(again) == set(IDS[3:])  # nothing already predicted was asked again
        assert again["10000004"] == 2 and again["10000006"] == 3  # one correction; two, then it gives up
        assert sorted(r["id"] for r in records(out)) == sorted(IDS)

        before_third = len(fake.requests)
        assert run(fake, out) == 0
        assert len(fake.requests) == before_third  # all done: no request at all

    metrics = json.loads((out / "metrics.json").read_text())
    m = metrics["groups"]["overall"]
    assert (m["samples"], m["predicted"]) == (8, 7)
    assert m["node_f1"] == pytest.approx(
        26 / 30
    )  # tp 13, fn 4 (one task left out, three for the invalid plan)
    assert m["edge_f1"] == pytest.approx(10 / 13)  # tp 5 of 8 gold edges, no false ones
    assert m["arg_v_f1"] == pytest.approx(26 / 33)  # tp 13, fp 1 ("example.png"), fn 6
    assert m["single_acc"] == 1.0
    assert m["invalid_share"] == pytest.approx(1 / 8)
    assert m["retries_mean"] == pytest.approx(3 / 8) and m["calls_mean"] == pytest.approx(11 / 8)
    assert m["hallucinated_share"] == pytest.approx(3 / 18)  # "audio-magic", 3 of 18 names written
    assert m["prompt_tokens_mean"] > 100 and m["completion_tokens_mean"] > 0
    assert metrics["groups"]["answered"]["samples"] == 7

    by_id = {r["id"]: r for r in records(out)}
    assert by_id["10000006"]["plan"] is None and "result" not in by_id["10000006"]
    assert by_id["10000003"]["result"]["task_nodes"] == [
        {"task": "Image Editing", "arguments": ["example.jpg", "make the sky purple"]}
    ]
    assert by_id["10000004"]["attempts"] == 2 and len(by_id["10000004"]["problems"]) == 1
    assert by_id["10000001"]["files"] == ["example.jpg"]

    report = (out / "report.md").read_text()
    assert "| TaskBench node F1 (pooled) | 0.867 |" in report
    assert "score as an empty plan" in report
    answered = report.split("## Answered samples only (as upstream reports)")[1]
    assert "| metric | answered | answered:single | answered:chain | answered:dag |" in answered
    assert "| metric | answered:tools=1 | answered:tools=2 |" in answered
    for chart in ("metrics_by_shape.png", "metrics_by_tools.png"):
        assert (out / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"]({chart})" in report

    # Re-scoring asks nothing and gives the same figures.
    assert main(["score", "--data", str(DATA), "--out", str(out)]) == 0
    assert json.loads((out / "metrics.json").read_text())["groups"] == metrics["groups"]


def test_a_killed_run_resumes_without_asking_again(tmp_path):
    out = tmp_path / "killed"
    with FakeLLMServer(latency=0.25) as fake:
        fake.responder = responder()
        command = [sys.executable, "-m", "hugginggpt.eval", *cli_args(fake, out)]
        child = subprocess.Popen(
            command, cwd=ROOT, env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        predictions = out / "predictions.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            if predictions.is_file() and predictions.read_text().count("\n") >= 2:
                break
            time.sleep(0.02)
        finished = child.poll() is not None
        child.kill()
        _, errors = child.communicate()
        assert not finished, f"the run ended before it could be killed: {errors.decode()[-2000:]}"
        done_before = {r["id"] for r in records(out)}
        assert 2 <= len(done_before) < 8
        first = len(fake.requests)
        fake.latency = 0  # the slow replies were for the kill; the resumed run need not wait

        assert run(fake, out) == 0
        again = asked(fake, first)
        assert not set(again) & done_before
        assert set(again) | done_before == set(IDS)
    ids = [r["id"] for r in records(out)]
    assert sorted(ids) == sorted(IDS)  # each id once


def test_backend_failures_are_not_recorded_and_are_asked_again(tmp_path, capsys):
    out = tmp_path / "flaky"
    with FakeLLMServer() as fake:
        fake.responder = responder(fail_ids={"10000002"})
        assert run(fake, out) == 0
        assert "10000002" not in {r["id"] for r in records(out)}
        assert "1 requests failed and were not recorded" in capsys.readouterr().err

        first = len(fake.requests)
        fake.responder = responder()
        assert run(fake, out) == 0
        assert asked(fake, first) == Counter({"10000002": 1})

    down = tmp_path / "down"
    with FakeLLMServer() as fake:
        fake.responder = responder(fail_ids=set(IDS))
        assert run(fake, down) == 1  # gives up after 3 failures in a row
        assert "stopped after 3 failed requests in a row" in capsys.readouterr().err
        assert len(fake.requests) < 8


def test_a_different_run_in_the_same_folder_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    with FakeLLMServer() as fake:
        fake.responder = responder()
        assert run(fake, out, "--limit", "1") == 0
        assert run(fake, out, "--limit", "1", "--shots", "0") == 2
        assert "holds another run" in capsys.readouterr().err


def test_two_models_compared(tmp_path):
    with FakeLLMServer() as fake:
        fake.responder = responder()
        assert run(fake, tmp_path / "good", "--workers", "4", model="good") == 0
        assert run(fake, tmp_path / "poor", model="poor") == 0
    good = json.loads((tmp_path / "good" / "metrics.json").read_text())["groups"]["overall"]
    for key in ("node_f1", "edge_f1", "arg_t_f1", "arg_v_f1", "task_f1", "single_acc"):
        assert good[key] == 1.0, key  # gold, planned through the LLM path, scores perfectly
    assert good["ned"] == 0.0 and good["seq_ed"] == 0.0 and good["invalid_share"] == 0.0

    out = tmp_path / "compare"
    assert main(["compare", str(tmp_path / "good"), str(tmp_path / "poor"), "--out", str(out)]) == 0
    text = (out / "compare.md").read_text()
    assert "| metric | good, all demos | poor, all demos |" in text
    assert "| TaskBench node F1 (pooled) | **1.000** | 0.867 |" in text
    assert "| Share of invalid plans (no valid plan after retries) | **0.000** | 0.125 |" in text
    for group in ("overall", "single", "chain", "dag"):
        assert (out / f"compare_{group}.png").read_bytes()[:4] == b"\x89PNG"


def test_mentioned_media_files_are_offered_as_uploads():
    from hugginggpt.eval.harness import mentioned_files

    files = mentioned_files(
        "Edit 'example.jpg', transcribe example.wav and example.wav again, then look at SCAN.PNG."
    )
    assert [(f.kind, f.name) for f in files] == [
        ("image", "example.jpg"),
        ("audio", "example.wav"),
        ("image", "SCAN.PNG"),
    ]
    assert mentioned_files("Summarise example.txt for me") == []


def test_a_line_cut_short_by_a_kill_is_dropped_and_trimmed(tmp_path):
    from hugginggpt.eval.harness import read_predictions

    path = tmp_path / "predictions.jsonl"
    path.write_text('{"id": "1", "plan": []}\n{"id": "2", "plan": []}\n{"id": "3", "pla')
    assert list(read_predictions(path)) == ["1", "2"]
    assert (
        path.read_text() == '{"id": "1", "plan": []}\n{"id": "2", "plan": []}\n'
    )  # appends start on a clean line


def test_a_reply_with_a_lone_surrogate_is_recorded_and_the_run_completes(tmp_path):
    """Half an emoji, sent by the server as a JSON escape, is a str UTF-8 cannot encode: writing
    its record crashed the run, and every rerun crashed again on the same request."""
    out = tmp_path / "emoji"
    broken = "Good morning \ud83d"
    with FakeLLMServer() as fake:
        base = responder()

        def respond(stage, body):
            if request_id(body)[0] == "10000002":
                return Reply(plan(t(0, "translation", {"text": broken})))
            return base(stage, body)

        fake.responder = respond
        assert run(fake, out, "--limit", "3") == 0
        first = len(fake.requests)
        assert run(fake, out, "--limit", "3") == 0
        assert len(fake.requests) == first  # all three recorded: nothing asked again
    (record,) = [r for r in records(out) if r["id"] == "10000002"]
    assert record["plan"][0]["args"]["text"] == broken
    assert (out / "metrics.json").is_file()


def test_a_run_on_another_gold_file_of_the_same_folder_is_refused(tmp_path, capsys):
    """A data folder may hold several gold files with the same ids (TaskBench's data.json and its
    improved re-release): predictions made for one must not be resumed into a run of the other."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    improved = data / "improved.jsonl"
    improved.write_text((data / "data.json").read_text())  # same ids; its plans could differ
    out = tmp_path / "run"
    common = ["--out", str(out), "--llm-model", "poor", "--llm-api-key", "x", "--no-progress", "--limit", "2"]
    with FakeLLMServer() as fake:
        fake.responder = responder()
        common += ["--llm-base-url", fake.url]
        assert main(["--data", str(data), *common]) == 0  # finds data.json
        assert main(["--data", str(data), "--gold", str(data / "data.json"), *common]) == 0  # the same file
        asked_before = len(fake.requests)
        assert main(["--data", str(data), "--gold", str(improved), *common]) == 2
        assert "holds another run" in capsys.readouterr().err
        assert len(fake.requests) == asked_before
