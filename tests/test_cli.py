"""The command line, run as users run it: a subprocess, the fake LLM server, a tiny local model."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent
PLAN = json.dumps(
    {"tasks": [{"task": "text-classification", "id": 0, "dep": [-1], "args": {"text": "a good cat"}}]}
)


def cli(*args, timeout=120):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "hugginggpt", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )


@pytest.fixture
def catalog_file(tiny, tmp_path):
    path = tmp_path / "mine.jsonl"
    card = {
        "id": "tiny/bert-cls",
        "task": "text-classification",
        "path": tiny("bert-classifier"),
        "library": "transformers",
        "local": True,
        "downloads": 10**12,
    }
    path.write_text(json.dumps(card) + "\n")
    return path


def test_request_end_to_end_as_json(catalog_file, tmp_path):
    with FakeLLMServer() as server:
        server.script("plan", PLAN)
        server.script("select", '{"0": {"id": "tiny/bert-cls", "reason": "my own fine-tune"}}')
        server.script("respond", "The text is labelled.")
        result = cli(
            "--llm-base-url",
            server.url,
            "--llm-model",
            "fake",
            "--llm-api-key",
            "sk-cli-secret",
            "--inference",
            "local",
            "--catalog",
            str(catalog_file),
            "--workdir",
            str(tmp_path / "ws"),
            "--json",
            "Is this text positive? 'a good cat'",
        )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out) >= {"answer", "error", "llm_calls", "tasks"}
    assert out["answer"] == "The text is labelled." and out["error"] is None and out["llm_calls"] == 3
    (task,) = out["tasks"]
    assert task["model"] == "tiny/bert-cls" and task["status"] == "done" and task["error"] is None
    assert {o["kind"] for o in task["outputs"]} == {"text", "data"}
    # stages were shown live on stderr, and the key never
    for words in (
        "[plan] 1 task(s)",
        "[select] task 0 text-classification: tiny/bert-cls (my own fine-tune)",
        "[task 0] done",
        "[done] 3 LLM call(s)",
    ):
        assert words in result.stderr
    assert "sk-cli-secret" not in result.stderr + result.stdout
    assert Path(out["trace_file"]).is_file() and "sk-cli-secret" not in Path(out["trace_file"]).read_text()


def test_plain_output_streams_the_answer_to_stdout(tmp_path):
    with FakeLLMServer() as server:
        server.script("plan", '{"tasks": []}').script("respond", "Hello there!")
        result = cli("--llm-base-url", server.url, "--workdir", str(tmp_path / "ws"), "hi")
    assert result.returncode == 0 and result.stdout == "Hello there!\n"
    assert "[plan] no model needed" in result.stderr


def test_failed_request_exits_1_with_the_error_in_json(tmp_path):
    result = cli("--llm-base-url", "http://127.0.0.1:9/v1", "--workdir", str(tmp_path / "ws"), "--json", "hi")
    assert result.returncode == 1
    out = json.loads(result.stdout)
    assert "could not be reached" in out["error"] and out["tasks"] == [] and out["answer"] == ""


@pytest.mark.parametrize(
    "args, words",
    [
        ([], "request"),
        (["--inference", "cloud", "x"], "invalid choice"),
        (["--file", "/no/such.png", "x"], "no such file"),
    ],
)
def test_bad_usage_exits_2(args, words):
    result = cli(*args)
    assert result.returncode == 2 and words in result.stderr


def test_broken_config_file_or_workdir_is_bad_usage_not_a_traceback(tmp_path):
    from io import StringIO

    from hugginggpt.commands.cli import main

    broken = tmp_path / "broken.yaml"
    broken.write_text("top_k: [\n")
    wrong_type = tmp_path / "wrong.yaml"
    wrong_type.write_text("top_k: [1, 2]\n")
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    for args in (
        ["--config", str(broken), "hi"],
        ["--config", str(wrong_type), "hi"],
        ["--workdir", str(a_file), "--llm-base-url", "http://127.0.0.1:9/v1", "hi"],
    ):
        out, err = StringIO(), StringIO()
        assert main(args, stdout=out, stderr=err) == 2, args
        assert err.getvalue().startswith("error: ") and "Traceback" not in err.getvalue()


def test_unparsable_llm_base_url_is_bad_usage(tmp_path):
    from io import StringIO

    from hugginggpt.commands.cli import main

    out, err = StringIO(), StringIO()
    assert (
        main(
            ["--llm-base-url", "http://[::1", "--workdir", str(tmp_path / "ws"), "hi"], stdout=out, stderr=err
        )
        == 2
    )
    assert err.getvalue().startswith("error: ") and "http://[::1" in err.getvalue()


def test_the_terminal_output_reads_cleanly(catalog_file, tmp_path):
    """--help names replay; the answer's line ends before [done], printed once also after a review;
    transformers' warnings and loading bars only with --verbose."""
    assert "replay" in cli("--help").stdout
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS")
    }
    env["PYTHONPATH"] = str(ROOT)
    env["HUGGINGGPT_CACHE_MAX_BYTES"] = "0"  # each run loads the model: no result from the cache

    def run(*more: str) -> str:
        with FakeLLMServer() as server:
            server.script("plan", PLAN).script("select", '{"0": {"id": "tiny/bert-cls", "reason": "mine"}}')
            server.script("respond", "The text is labelled.")
            args = ["--llm-base-url", server.url, "--inference", "local", "--catalog", str(catalog_file)]
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "hugginggpt",
                    *args,
                    *more,
                    "--workdir",
                    str(tmp_path / "ws"),
                    "label it",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,  # one stream, as a terminal shows both
                text=True,
                timeout=120,
                cwd=ROOT,
                env=env,
            )
        assert result.returncode == 0, result.stdout
        return result.stdout

    quiet = run()
    # the answer's line ends, then (issue 23) each task's estimate beside what it took, then [done]
    ended = re.search(
        r"The text is labelled\.\n(\[task \d+\] estimated [^\n]*\n)*\[done\] 3 LLM call\(s\)", quiet
    )
    assert ended and quiet.count("[done]") == 1, quiet
    assert "Loading weights" not in quiet
    assert "Loading weights" in run("--verbose")  # the loading bar, when asked for


def test_a_plan_ready_for_review_is_not_reported_as_done():
    from hugginggpt.commands.progress import describe
    from hugginggpt.run.events import Done, Outcome

    calls = {"llm_calls": [{}, {}]}
    assert describe(Done(Outcome.PLANNED, trace=calls), ROOT) == "[plan] ready: 2 LLM call(s)"
    assert describe(Done(Outcome.ANSWERED, trace=calls), ROOT).startswith("[done] 2 LLM call(s)")
