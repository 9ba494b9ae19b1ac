"""The command line's plan control, run as users run it (a subprocess, a tiny local model, the fake
LLM server counting calls per stage): --plan-only, --plan FILE, --review, and a request repeated."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer

from hugginggpt.commands.cli import main

ROOT = Path(__file__).resolve().parent.parent
PLAN = [
    {"task": "text-classification", "id": 0, "dep": [-1], "args": {"text": "a good cat"}},
    {"task": "token-classification", "id": 1, "dep": [-1], "args": {"text": "the red dog"}},
]
PICK = '{"0": {"id": "tiny/cls-b", "reason": "the smaller one"}}'


def flags(server, tmp_path) -> list[str]:
    return [
        *(
            "--llm-base-url",
            server.url,
            "--llm-model",
            "fake",
            "--llm-api-key",
            "sk-x",
            "--inference",
            "local",
        ),
        *("--catalog", str(tmp_path / "mine.jsonl"), "--workdir", str(tmp_path / "ws")),
    ]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def cli(server, tmp_path, *args, stdin=None) -> Result:
    """In this process (the tiny models load once); one test below runs `python -m hugginggpt`."""
    out, err = io.StringIO(), io.StringIO()
    code = main([*flags(server, tmp_path), *args], stdout=out, stderr=err, stdin=stdin or io.StringIO())
    return Result(code, out.getvalue(), err.getvalue())


@contextmanager
def terminal(typed: bytes):
    """A pseudo-terminal as stdin, with `typed` already waiting in it."""
    master, slave = os.openpty()
    os.write(master, typed)
    try:
        with open(slave, encoding="utf-8", closefd=False) as stdin:
            yield stdin
    finally:
        os.close(slave)
        os.close(master)


@pytest.fixture
def catalog(tiny, tmp_path):
    classifier, tagger = tiny("bert-classifier"), tiny("bert-tagger")
    cards = [
        {"id": "tiny/cls-a", "task": "text-classification", "path": classifier, "downloads": 10**12},
        {"id": "tiny/cls-b", "task": "text-classification", "path": classifier, "downloads": 10**12 - 1},
        {"id": "tiny/tagger", "task": "token-classification", "path": tagger, "downloads": 10**12},
    ]
    lines = [json.dumps({**c, "library": "transformers", "local": True}) for c in cards]
    (tmp_path / "mine.jsonl").write_text("\n".join(lines) + "\n")


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        s.script("plan", json.dumps(PLAN)).script("select", PICK).script("respond", "Labelled.")
        yield s


def test_plan_only_prints_the_plan_with_its_models_and_runs_nothing(catalog, server, tmp_path):
    result = subprocess.run(  # as users run it
        [
            sys.executable,
            "-m",
            "hugginggpt",
            *flags(server, tmp_path),
            "--plan-only",
            "--json",
            "label these",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["request"] == "label these" and [t["task"] for t in out["plan"]] == [t["task"] for t in PLAN]
    assert out["choices"]["0"]["model"] == "tiny/cls-b" and out["choices"]["1"]["model"] == "tiny/tagger"
    assert server.stages() == ["plan", "select"]
    assert not any((tmp_path / "ws" / "outputs").rglob("*.*"))  # nothing ran
    plain = cli(server, tmp_path, "--plan-only", "label these")
    assert (
        "task 0: text-classification with tiny/cls-b" in plain.stdout
        and 'text = "a good cat"' in plain.stdout
    )


def test_a_plan_file_runs_with_no_planning_and_no_selection_call(catalog, server, tmp_path):
    planned = cli(server, tmp_path, "--plan-only", "--json", "label these")
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(planned.stdout)
    server.reset()
    server.script("respond", "Labelled.")
    result = cli(server, tmp_path, "--plan", str(plan_file), "--json")  # the request comes from the file
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert server.stages() == ["respond"] and out["llm_calls"] == 1
    assert [(t["model"], t["status"]) for t in out["tasks"]] == [
        ("tiny/cls-b", "done"),
        ("tiny/tagger", "done"),
    ]
    assert "given in the plan" in result.stderr


def test_a_plan_file_without_a_model_for_a_task_selects_only_that_one(catalog, server, tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps({"plan": PLAN, "choices": {"1": {"model": "tiny/tagger"}}}))
    server.reset()
    server.script("select", PICK).script("respond", "ok")
    result = cli(server, tmp_path, "--plan", str(plan_file), "--json", "label these")
    assert result.returncode == 0, result.stderr
    assert server.stages() == ["select", "respond"]
    assert "tiny/tagger" not in server.requests[0]["messages"][-1]["content"]


@pytest.mark.parametrize(
    "content, words",
    [("{not json", "not a JSON file"), ('{"plan": [{"task": "fly", "id": 0}]}', "unknown task type")],
)
def test_a_bad_plan_file_is_a_clear_error(catalog, server, tmp_path, content, words):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(content)
    result = cli(server, tmp_path, "--plan", str(plan_file), "do it")
    assert result.returncode in (1, 2) and words in result.stderr and "Traceback" not in result.stderr
    assert server.requests == []


def test_the_same_request_twice_runs_no_model_the_second_time(catalog, server, tmp_path):
    first = json.loads(cli(server, tmp_path, "--json", "label these").stdout)
    second = cli(server, tmp_path, "--json", "label these")
    out = json.loads(second.stdout)
    assert [t["cached"] for t in first["tasks"]] == [False, False]
    assert [t["cached"] for t in out["tasks"]] == [True, True]
    assert [t["outputs"] for t in out["tasks"]][0][1] == first["tasks"][0]["outputs"][1]  # the same data
    assert second.stderr.count("from the cache") == 2
    trace = json.loads(Path(out["trace_file"]).read_text())
    assert [t["cached"] for t in trace["tasks"]] == [True, True]


def test_the_cache_and_the_estimates_follow_the_workdir_not_the_current_directory(
    catalog, server, tmp_path, monkeypatch
):
    monkeypatch.delenv("HUGGINGGPT_CACHE_DIR", raising=False)  # the tests' shared cache: the default here
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir(), there.mkdir()
    monkeypatch.chdir(here)
    first = json.loads(cli(server, tmp_path, "--json", "label these").stdout)
    monkeypatch.chdir(there)
    second = json.loads(cli(server, tmp_path, "--json", "label these").stdout)
    assert [t["cached"] for t in first["tasks"]] == [False, False]
    assert [t["cached"] for t in second["tasks"]] == [True, True]
    assert list(here.iterdir()) == list(there.iterdir()) == []  # nothing written where it was run
    assert (tmp_path / "ws" / ".cache").is_dir() and (tmp_path / "ws" / ".estimates").is_dir()


def test_review_needs_a_terminal(catalog, server, tmp_path):
    result = cli(server, tmp_path, "--review", "label these")
    assert result.returncode == 2 and "needs a terminal" in result.stderr and server.requests == []


EDITOR = """
import json, sys
path = sys.argv[1]
plan = json.load(open(path))
plan["plan"][0]["args"]["text"] = "a bad dog"
json.dump(plan, open(path, "w"))
"""


def test_review_in_a_terminal_edits_the_plan_then_runs_it(catalog, server, tmp_path, monkeypatch):
    editor = tmp_path / "editor.py"
    editor.write_text(EDITOR)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)
    with terminal(b"e\ny\n") as stdin:  # edit, then run the edited plan
        result = cli(server, tmp_path, "--review", "--json", "label these", stdin=stdin)
    assert result.returncode == 0, result.stderr
    assert "Run this plan? [y]es, [e]dit, [n]o" in result.stderr
    assert server.stages() == ["plan", "select", "respond"]  # the reviewed plan keeps its models
    trace = json.loads(Path(json.loads(result.stdout)["trace_file"]).read_text())
    assert trace["plan"][0]["args"]["text"] == "a bad dog" and trace["plan_given"] is True


def test_review_cancelled_runs_nothing(catalog, server, tmp_path):
    with terminal(b"n\n") as stdin:
        result = cli(server, tmp_path, "--review", "label these", stdin=stdin)
    assert result.returncode == 1 and "nothing was run" in result.stderr
    assert server.stages() == ["plan", "select"]
