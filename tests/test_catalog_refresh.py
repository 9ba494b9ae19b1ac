"""`python -m hugginggpt.catalog refresh` against a fake Hub API on 127.0.0.1 (HF_ENDPOINT)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.hub_server import FakeHub, HubModel

from hugginggpt.catalog import load_catalog
from hugginggpt.catalog.hub import summary

ROOT = Path(__file__).resolve().parent.parent

README = """---
license: apache-2.0
language: [en]
---
# Acme Summariser

![logo](logo.png)

| a | b |
|---|---|

Acme Summariser turns **long reports** into a [short summary](https://example.org) of three
sentences. It was fine-tuned on news.

## Usage
```python
print("hi")
```
"""

MODELS = [
    HubModel(
        "acme/summariser",
        "summarization",
        downloads=900,
        likes=12,
        library_name="transformers",
        tags=["transformers", "safetensors", "bart", "en", "license:apache-2.0", "region:us"],
        card_data={"license": "apache-2.0", "language": ["en"], "datasets": ["cnn_dailymail"]},
        safetensors={"parameters": {"F32": 1000, "F16": 10}, "total": 1010},
        readme=README,
    ),
    HubModel(
        "acme/tiny-sum", "summarization", downloads=50, likes=1, library_name="transformers", tags=["t5"]
    ),
    HubModel("acme/third-sum", "summarization", downloads=10, library_name="transformers"),
    HubModel("facebook/bart-large-cnn", "summarization", downloads=7, likes=1, library_name="transformers"),
    HubModel("acme/painter", "text-to-image", downloads=300, library_name="diffusers", tags=["diffusers"]),
    HubModel(
        "acme/controlnet-canny-xl",
        "text-to-image",
        downloads=40,
        library_name="diffusers",
        tags=["controlnet", "diffusers"],
    ),
    HubModel(
        "acme/chat", "text-generation", downloads=80, library_name="transformers", tags=["conversational"]
    ),
]


def refresh(hub_url: str | None, *args: str, offline: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1" if offline else "0", HF_HUB_DISABLE_TELEMETRY="1")
    env["HF_HOME"] = str(ROOT / ".tmp" / "hf-home-catalog")  # no saved login token goes to the fake Hub
    env.pop("HF_TOKEN", None)
    if hub_url:
        env["HF_ENDPOINT"] = hub_url
    return subprocess.run(
        [sys.executable, "-m", "hugginggpt.catalog", "refresh", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def hub():
    with FakeHub(MODELS) as server:
        yield server


def test_refresh_writes_a_user_catalog_from_the_hub(hub, tmp_path, monkeypatch):
    out = tmp_path / "refreshed.jsonl"
    result = refresh(
        hub.url,
        "--task",
        "summarization",
        "--task",
        "text-to-image",
        "--task",
        "conversational",
        "--task",
        "canny-text-to-image",
        "--limit",
        "3",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    assert f"wrote 7 models for 4 task(s) to {out}" in result.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by_key = {(r["task"], r["id"]): r for r in rows}
    assert [r["id"] for r in rows if r["task"] == "summarization"] == [
        "acme/summariser",
        "acme/tiny-sum",
        "acme/third-sum",
    ]  # the Hub's order, cut at --limit
    top = by_key[("summarization", "acme/summariser")]
    assert top["downloads"] == 900 and top["likes"] == 12 and top["library"] == "transformers"
    assert (
        top["license"] == "apache-2.0" and top["languages"] == ["en"] and top["datasets"] == ["cnn_dailymail"]
    )
    assert top["size_bytes"] == 1000 * 4 + 10 * 2 and top["local"] is True
    assert top["tags"] == ["bart"]  # housekeeping tags dropped
    assert top["description"].startswith("Acme Summariser turns long reports into a short summary")
    assert by_key[("summarization", "acme/tiny-sum")]["description"].startswith("A T5 model")  # no README
    assert ("conversational", "acme/chat") in by_key
    assert ("canny-text-to-image", "acme/controlnet-canny-xl") in by_key

    queries = [r["query"] for r in hub.requests if r["path"] == "/api/models"]
    summ = next(q for q in queries if q.get("pipeline_tag") == ["summarization"])
    assert summ["sort"] == ["downloads"] and summ["limit"] == ["3"]
    assert {"downloads", "likes", "cardData", "safetensors", "library_name"} <= set(summ["expand"])
    assert any(q.get("filter") == ["controlnet"] and q.get("search") == ["canny"] for q in queries)

    # The refreshed file is a user catalog: its facts override the shipped ones.
    monkeypatch.delenv("HUGGINGGPT_CATALOG", raising=False)
    catalog = load_catalog([out])
    assert catalog.problems == []
    bart = catalog.get("facebook/bart-large-cnn", "summarization")
    assert bart.downloads > 1_000_000  # not refreshed (beyond --limit): the shipped facts stay
    assert catalog.get("acme/summariser", "summarization").size_bytes == 4020
    assert "acme/painter" in [c.id for c in catalog.candidates("text-to-image", k=100)]


def test_refreshing_one_task_keeps_the_other_tasks_entries(hub, tmp_path):
    out = tmp_path / "refreshed.jsonl"
    old_summary = {"id": "acme/old-sum", "task": "summarization", "downloads": 1}
    painter = {"id": "acme/kept-painter", "task": "text-to-image", "downloads": 5}
    out.write_text(json.dumps(old_summary) + "\n" + json.dumps(painter) + "\nnot json, the user's to fix\n")
    result = refresh(hub.url, "--task", "summarization", "--limit", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert (
        "wrote 2 models for 1 task(s)" in result.stdout and "kept 2 entries of other tasks" in result.stdout
    )
    lines = out.read_text().splitlines()
    assert json.loads(lines[0]) == painter and lines[1] == "not json, the user's to fix"
    assert [json.loads(line)["id"] for line in lines[2:]] == [
        "acme/summariser",
        "acme/tiny-sum",
    ]  # old-sum replaced


def test_refresh_offline_is_one_clear_line_and_writes_nothing(tmp_path):
    out = tmp_path / "never.jsonl"
    result = refresh(None, "--task", "summarization", "--limit", "2", "--out", str(out), offline=True)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: cannot reach the Hugging Face Hub")
    assert "HF_HUB_OFFLINE=1" in lines[-1] and "nothing was written" in lines[-1]
    assert not out.exists() and not out.with_name(out.name + ".part").exists()


def test_refresh_reports_a_hub_error_in_one_line(tmp_path):
    out = tmp_path / "never.jsonl"
    with FakeHub(MODELS, api_status=401) as failing:
        result = refresh(failing.url, "--task", "summarization", "--out", str(out))
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: cannot reach the Hugging Face Hub at {failing.url} (")
    assert "401" in last and last.endswith("nothing was written")
    assert not out.exists()


def test_refresh_rejects_unknown_tasks(tmp_path):
    result = refresh(None, "--task", "make-coffee", "--out", str(tmp_path / "x.jsonl"), offline=True)
    assert result.returncode == 2 and "unknown task(s): make-coffee" in result.stderr


def test_summary_takes_the_first_prose_paragraph():
    assert summary(README) == (
        "Acme Summariser turns long reports into a short summary of three sentences. "
        "It was fine-tuned on news."
    )
    assert summary("---\na: b\n---\n# Title only\n") == ""
    long = "word " * 200
    cut = summary(long, max_chars=50)
    assert len(cut) <= 50 and cut.endswith("...")
