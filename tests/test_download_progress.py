"""A task that waits for its model's download and load says so: a real huggingface_hub download from a
fake Hub on 127.0.0.1 (HF_ENDPOINT) that serves a tiny model slowly, through the local endpoint."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from fakes.hub_server import FakeHub, HubModel

from hugginggpt.catalog import ModelCard
from hugginggpt.endpoints import LocalEndpoint
from hugginggpt.events import Phase, TaskFinished, TaskProgress
from hugginggpt.execute import ExecutionSettings, RunContext, execute_steps
from hugginggpt.plan import parse_plan
from hugginggpt.selection import Choice
from hugginggpt.workspace import Workspace

REPO = "acme/tiny-progress-bert"
PLAN = parse_plan('[{"task": "text-classification", "id": 0, "dep": [-1], "args": {"text": "the cat"}}]')


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
