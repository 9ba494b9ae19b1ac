"""A task that waits for its model's download and load says so: a real huggingface_hub download from a
fake Hub on 127.0.0.1 (HF_ENDPOINT) that serves a tiny model slowly, through the local endpoint."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

import openai
import pytest
from app_support import app_settings, fake_catalog, running_app
from fakes.endpoints import FakeEndpoint
from fakes.hub_server import FakeHub, HubModel
from fakes.llm_server import FakeLLMServer

from hugginggpt.catalog import ModelCard
from hugginggpt.endpoints import LocalEndpoint
from hugginggpt.files.workspace import Workspace
from hugginggpt.run.events import Phase, TaskFinished, TaskProgress
from hugginggpt.run.task_graph import execute_steps
from hugginggpt.run.task_progress import ProgressEvents
from hugginggpt.stages.execute import ExecutionSettings, RunContext
from hugginggpt.stages.plan import parse_plan
from hugginggpt.stages.selection import Choice

ROOT = Path(__file__).resolve().parent.parent
REPO = "acme/tiny-progress-bert"
PLAN_JSON = '[{"task": "text-classification", "id": 0, "dep": [-1], "args": {"text": "the cat"}}]'
PLAN = parse_plan(PLAN_JSON)


@pytest.fixture
def slow_hub(tiny, tmp_path, monkeypatch):
    """The tiny classifier as a Hub repo, sent in 4 KiB pieces 80 ms apart (about 2 s), with the Hub online
    for this test only (huggingface_hub's constants, put back after it) and an empty HF cache."""
    from huggingface_hub import constants

    folder = Path(tiny("bert-classifier"))
    with FakeHub(
        [HubModel(REPO, "text-classification", folder=folder)], chunk_bytes=4096, chunk_seconds=0.08
    ) as hub:
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        template = hub.url + "/{repo_id}/resolve/{revision}/{filename}"  # made from ENDPOINT at import
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
        monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 4096)  # 10 MiB by default: one report a file
        yield hub, sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    import models_local

    models_local.default_runtime().drop(REPO)


def test_a_download_then_a_load_show_in_the_task_events(slow_hub, tmp_path):
    hub, size = slow_hub
    workspace = Workspace(tmp_path / "conv")
    card = ModelCard(id=REPO, task="text-classification", library="transformers", local=True)
    ctx = RunContext(
        LocalEndpoint(), workspace, workspace.run_dir("r1"), ExecutionSettings(), threading.Event()
    )
    choices = {0: Choice(0, "text-classification", card, "test", (card,))}

    events = list(execute_steps(PLAN, choices, ctx))

    assert isinstance(events[-1], TaskFinished), events[-1]
    progress = [e for e in events if isinstance(e, TaskProgress)]
    downloads = [e for e in progress if e.phase is Phase.DOWNLOAD]
    assert len(downloads) >= 3, progress  # it took over a second: reported as it came, thinned out
    assert all(e.total_bytes == size for e in downloads)  # the listing's total, from the first report
    counts = [e.done_bytes for e in downloads]
    assert counts == sorted(counts) and counts[0] < size and counts[-1] == size
    assert any(e.bytes_per_second and e.seconds_left is not None for e in downloads)
    assert progress[-1].phase is Phase.LOAD and progress[-1].model == REPO
    assert any("/resolve/" in r["path"] for r in hub.requests)  # it really came from the fake Hub


def test_reports_are_thinned_out_with_speed_and_time_left_from_the_download_so_far():
    now = [0.0]
    posted: list[TaskProgress] = []
    report = ProgressEvents(0, "text-to-image", "a/paint", posted.append, clock=lambda: now[0])
    for tick in range(1, 41):  # 10 MB a second, in 40 reports a tenth of a second apart
        now[0] = tick / 10
        report("download", tick * 1_000_000, 100_000_000)
    assert [e.done_bytes for e in posted] == [
        1_000_000,
        6_000_000,
        11_000_000,
        16_000_000,
        21_000_000,
        26_000_000,
        31_000_000,
        36_000_000,
    ]  # the first, then 2 a second
    assert posted[-1].bytes_per_second == pytest.approx(10_000_000)  # 35 MB in 3.5 s
    assert posted[-1].seconds_left == pytest.approx(6.4)  # 64 MB to go
    report("download", 100_000_000, 100_000_000)  # the end shows at once
    report("load", 0, 0)  # so does a new phase
    report.close()
    report("load", 0, 0)  # after the call: dropped
    assert [e.phase for e in posted[-2:]] == [Phase.DOWNLOAD, Phase.LOAD] and posted[
        -2
    ].done_bytes == 100_000_000
    assert len(posted) == 10


def test_a_prefetch_before_a_zerogpu_call_reports_its_download_too(slow_hub):
    _, size = slow_hub
    reports: list[tuple[str, int, int]] = []
    card = ModelCard(id=REPO, task="text-classification", library="transformers", local=True)

    LocalEndpoint.prefetch(card, lambda *report: reports.append(report))
    assert reports and reports[-1] == ("download", size, size)
    assert all(total == size for _, _, total in reports) and len(reports) > 3


def cli_with_download(tiny, tmp_path, *, tty: bool) -> tuple[str, list[str]]:
    """`python -m hugginggpt` whose one task downloads the tiny classifier from a slow fake Hub (its
    environment names the Hub, so nothing leaks to other tests); (its stderr, the Hub's paths)."""
    folder = Path(tiny("bert-classifier"))
    tmp_path.mkdir()
    catalog = tmp_path / "mine.jsonl"
    card = {
        "id": REPO,
        "task": "text-classification",
        "library": "transformers",
        "local": True,
        "downloads": 10**12,
    }
    catalog.write_text(json.dumps(card) + "\n")
    plan = json.dumps({"tasks": [json.loads(PLAN_JSON)[0]]})
    hub_model = HubModel(REPO, "text-classification", folder=folder)
    with FakeHub([hub_model], chunk_bytes=4096, chunk_seconds=0.08) as hub, FakeLLMServer() as llm:
        llm.script("plan", plan).script("select", json.dumps({"0": {"id": REPO, "reason": "mine"}}))
        llm.script("respond", "Labelled.")
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HF_ENDPOINT": hub.url,
            "HF_HUB_OFFLINE": "0",
            "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
        }
        args = ["--llm-base-url", llm.url, "--inference", "local", "--catalog", str(catalog)]
        command = [sys.executable, "-m", "hugginggpt", *args, "--workdir", str(tmp_path / "ws"), "label it"]
        if not tty:
            result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
            assert result.returncode == 0, result.stderr
            return result.stderr, [r["path"] for r in hub.requests]
        leader, follower = pty.openpty()  # stderr is a terminal
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower, cwd=ROOT, env=env) as child:
            os.close(follower)
            shown = b""
            while True:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
            assert child.wait(timeout=120) == 0, shown
        os.close(leader)
        return shown.decode(errors="replace"), [r["path"] for r in hub.requests]


def test_the_cli_shows_the_download_on_a_terminal_only(tiny, tmp_path):
    logged, requests = cli_with_download(tiny, tmp_path / "piped", tty=False)
    assert any("/resolve/" in p for p in requests), logged  # it downloaded from the fake Hub
    assert "[task 0] done" in logged
    assert "downloading" not in logged and "loading weights" not in logged and "\r" not in logged

    shown, _ = cli_with_download(tiny, tmp_path / "tty", tty=True)
    assert f"\r[task 0] {REPO}: downloading " in shown and " kB of 97.8 kB" in shown
    assert f"\r[task 0] {REPO}: loading weights\x1b[K" in shown
    assert "\r\x1b[K[task 0] done" in shown  # the progress line is cleared before the next line


class DownloadingEndpoint(FakeEndpoint):
    """Its model "downloads" for 1.5 s in 30 reports, then "loads", as the local endpoint reports."""

    def run(self, task, model, inputs, call):
        assert call.progress is not None  # the executor gave it for this call
        for n in range(1, 31):
            call.progress("download", n * 1_000_000, 30_000_000)
            time.sleep(0.05)
        call.progress("load", 0, 0)
        return super().run(task, model, inputs, call)


def test_the_openai_api_streams_the_download_as_reasoning_thinned_out(tmp_path):
    paint = [{"task": "text-to-image", "id": 0, "dep": [-1], "args": {"text": "a red cat"}}]
    with FakeLLMServer() as llm:
        llm.script("plan", json.dumps({"tasks": paint}))
        llm.script("select", json.dumps({"0": {"id": "org/painter", "reason": "the painter"}}))
        llm.script("respond", "Here is your cat.")
        settings = app_settings(llm, tmp_path / "ws", api_keys=("key-one",))
        with running_app(settings, catalog=fake_catalog(), endpoint=DownloadingEndpoint()) as demo:
            api = openai.OpenAI(base_url=demo.local_url.rstrip("/") + "/v1", api_key="key-one", max_retries=0)
            stream = api.chat.completions.create(
                model="hugginggpt", messages=[{"role": "user", "content": "paint a cat"}], stream=True
            )
            reasoning = "".join(
                (chunk.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                for chunk in stream
                if chunk.choices
            )
    lines = reasoning.splitlines()
    downloads = [line for line in lines if line.startswith("[task 0] org/painter: downloading ")]
    # the executor passed on several (two a second); a log keeps one every 5 s, and each new phase
    assert downloads == ["[task 0] org/painter: downloading 1 MB of 30 MB"], reasoning
    assert "[task 0] org/painter: loading weights" in lines
    assert lines.index("[task 0] org/painter: loading weights") < next(
        i for i, line in enumerate(lines) if line.startswith("[task 0] done")
    )
