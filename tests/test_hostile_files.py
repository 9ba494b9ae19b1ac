"""Hostile files a person can be handed (plan, trace, catalog, config): each is refused with a clear
message and exit code 2, never a traceback; in the app, a message instead of Gradio's "Error"."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from hugginggpt.catalog import Catalog
from hugginggpt.catalog.userfile import read_user_file
from hugginggpt.config import load_settings
from hugginggpt.stages.planfile import PlanFileError, given_plan, read_plan_file

ROOT = Path(__file__).resolve().parent.parent
DEEP = "[" * 100_000 + "]" * 100_000  # 200 kB
PLAN = [{"task": "text-classification", "id": 0, "dep": [-1], "args": {"text": "a"}}]


def test_a_deeply_nested_plan_file_is_refused_with_exit_code_2(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(DEEP)
    with pytest.raises(PlanFileError, match="nested more than 64 levels"):
        read_plan_file(plan, Catalog([]))
    result = subprocess.run(
        [sys.executable, "-m", "hugginggpt", "--llm-base-url", "http://127.0.0.1:9/v1", "--plan", str(plan)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 2 and "nested more than 64 levels" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_deeply_nested_trace_is_refused_by_replay_with_exit_code_2(tmp_path):
    from hugginggpt.commands.replay import main

    trace = tmp_path / "trace.json"
    trace.write_text('{"plan": ' + DEEP + "}")
    err = io.StringIO()
    assert main([str(trace)], stdout=io.StringIO(), stderr=err) == 2
    assert "nested more than 64 levels" in err.getvalue()


@pytest.mark.parametrize("key", ["9" * 5000, "²", "٣"])
def test_a_choices_key_that_is_no_task_id_is_a_plan_file_error(key):
    with pytest.raises(PlanFileError, match="which is not in the plan"):
        given_plan({"plan": PLAN, "choices": {key: "acme/x"}}, Catalog([]))


def test_hostile_catalog_and_config_files_are_problems_not_tracebacks(tmp_path):
    mine = tmp_path / "mine.jsonl"
    mine.write_text(DEEP + "\n")
    _, problems = read_user_file(mine)
    assert problems == [f"{mine}:1: nested more than 64 levels deep"]
    config = tmp_path / "config.yaml"
    config.write_text("1: x\nfoo: y\n")  # a YAML key that is a number: unknown names sorted together
    with pytest.raises(ValueError, match="every key must be a string"):
        load_settings(config, environ={})
    config.write_text("[" * 10_000 + "]" * 10_000)
    with pytest.raises(ValueError, match="nested more than 64 levels"):
        load_settings(config, environ={})


HOSTILE_NAME = '<button id="pay">Pay</button> http://evil.example/login'


def test_a_trace_whose_task_name_is_markup_is_refused_when_loaded():
    from hugginggpt.run.traces import plan_from_trace

    trace = {"plan": [{**PLAN[0], "task": HOSTILE_NAME}], "choices": {}}
    with pytest.raises(PlanFileError, match="task 0 of the trace has an unknown task type"):
        plan_from_trace(trace, Catalog([]))


def test_the_review_form_shows_a_task_name_through_the_allow_list():
    import gradio as gr

    from webui.page.review_panel import _task_fields

    task = {"id": 0, "task": HOSTILE_NAME, "candidates": [], "model": "", "dep": "", "seed": ""}
    with gr.Blocks() as page:
        _task_fields(gr, {**task, "delete": False, "args": {}, "problems": []})
    [title] = [b for b in page.blocks.values() if getattr(b, "elem_id", None) == "review-task-0"]
    assert "<button" not in title.value and "Pay" in title.value


def test_a_private_app_reached_through_a_proxy_warns_once(tmp_path, caplog):
    """The app on loopback (not public), asked through a proxy: one warning that names the fix."""
    import httpx
    from app_support import app_settings, fake_catalog, running_app
    from fakes.endpoints import FakeEndpoint
    from fakes.llm_server import FakeLLMServer

    with FakeLLMServer() as llm, caplog.at_level("WARNING", logger="webui.page.proxy_warning"):
        with running_app(
            app_settings(llm, tmp_path / "ws"), catalog=fake_catalog(), endpoint=FakeEndpoint()
        ) as demo:
            httpx.get(demo.local_url, timeout=30)  # no proxy: no warning
            for _ in range(3):
                httpx.get(demo.local_url, headers={"X-Forwarded-For": "203.0.113.7"}, timeout=30)
    [warning] = [r.getMessage() for r in caplog.records if r.name == "webui.page.proxy_warning"]
    assert "x-forwarded-for" in warning and "HUGGINGGPT_PUBLIC=1" in warning
