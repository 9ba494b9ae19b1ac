"""`python -m hugginggpt.catalog refresh` against a fake Hub API on 127.0.0.1 (HF_ENDPOINT)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.hub_server import FakeHub, HubModel

from hugginggpt.catalog import load_catalog
from hugginggpt.catalog.card import ProviderRoute
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
        providers={"hf-inference": {"status": "live", "task": "summarization"}},
    ),
    HubModel(
        "acme/tiny-sum",
        "summarization",
        downloads=50,
        likes=1,
        library_name="transformers",
        tags=["t5"],
        card_data={"language": ["en", False]},  # the Hub's JSON of a card's YAML `language: [en, no]`
    ),
    HubModel("acme/third-sum", "summarization", downloads=10, library_name="transformers"),
    HubModel("facebook/bart-large-cnn", "summarization", downloads=7, likes=1, library_name="transformers"),
    HubModel(
        "acme/painter",
        "text-to-image",
        downloads=300,
        library_name="diffusers",
        tags=["diffusers"],
        gated="manual",
        providers={
            "fal-ai": {"status": "staging", "task": "text-to-image"},
            "replicate": {"status": "live", "task": "text-to-image"},
        },
    ),
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
    HubModel("acme/flaky", "translation", info_status=500),  # the Hub fails to answer about it
]


def refresh(hub_url: str | None, *args: str, offline: bool = False) -> subprocess.CompletedProcess:
    return catalog_cli(hub_url, "refresh", *args, offline=offline)


def catalog_cli(hub_url: str | None, *args: str, offline: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1" if offline else "0", HF_HUB_DISABLE_TELEMETRY="1")
    env["HF_HOME"] = str(ROOT / ".tmp" / "hf-home-catalog")  # no saved login token goes to the fake Hub
    env.pop("HF_TOKEN", None)
    if hub_url:
        env["HF_ENDPOINT"] = hub_url
    return subprocess.run(
        [sys.executable, "-m", "hugginggpt.catalog", *args],
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
    assert {
        "downloads",
        "likes",
        "cardData",
        "safetensors",
        "library_name",
        "inferenceProviderMapping",
    } <= set(summ["expand"])
    assert any(q.get("filter") == ["controlnet"] and q.get("search") == ["canny"] for q in queries)

    # The refreshed file is a user catalog: its facts override the shipped ones.
    monkeypatch.delenv("HUGGINGGPT_CATALOG", raising=False)
    catalog = load_catalog([out])
    assert catalog.problems == []
    bart = catalog.get("facebook/bart-large-cnn", "summarization")
    assert bart.downloads > 1_000_000  # not refreshed (beyond --limit): the shipped facts stay
    assert catalog.get("acme/summariser", "summarization").size_bytes == 4020
    # Which providers serve each model: kept on the card, an empty list where the Hub lists none.
    assert top["providers"] == [{"provider": "hf-inference", "status": "live", "task": "summarization"}]
    assert by_key[("summarization", "acme/tiny-sum")]["providers"] == []
    painter = catalog.get("acme/painter", "text-to-image")
    assert painter.providers == (
        ProviderRoute("fal-ai", "staging", "text-to-image"),
        ProviderRoute("replicate", "live", "text-to-image"),
    )
    assert catalog.get("acme/tiny-sum", "summarization").providers == ()
    assert bart.providers is None  # not refreshed: not known
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
    assert json.loads(lines[3])["languages"] == ["en", "no"]  # Norwegian, not "False"


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


def test_user_entries_may_state_providers_and_bad_ones_are_reported(tmp_path, monkeypatch):
    """What `catalog refresh` writes for providers, a user may write too; a wrong shape is a problem
    with its line, not a card the hosted endpoint would misread."""
    monkeypatch.delenv("HUGGINGGPT_CATALOG", raising=False)
    user = tmp_path / "providers.yaml"
    user.write_text(
        "- id: acme/sd\n  task: text-to-image\n"  # line 1
        "  providers: [{provider: fal-ai, status: live, task: text-to-image}]\n"
        "- id: acme/none\n  task: text-to-image\n  providers: []\n"  # line 4: known, none
        "- id: acme/bad\n  task: text-to-image\n  providers: fal-ai\n"  # line 7
        "- id: acme/worse\n  task: text-to-image\n  providers: [{provider: fal-ai}]\n"  # line 10
    )
    catalog = load_catalog([user], shipped=None)
    assert catalog.get("acme/sd").providers == (ProviderRoute("fal-ai", "live", "text-to-image"),)
    assert catalog.get("acme/none").providers == ()
    assert [p.split(": ")[0] for p in catalog.problems] == [f"{user}:7", f"{user}:10"]
    assert "`providers` must be a list of {provider, status, task}" in catalog.problems[0]
    assert catalog.get("acme/bad") is None and catalog.get("acme/worse") is None


# --- check -----------------------------------------------------------------------------------------


def test_check_reports_existence_gating_providers_and_local(hub):
    result = catalog_cli(
        hub.url, "check", "acme/summariser", "acme/painter", "acme/gone", "--task", "summarization"
    )
    assert result.returncode == 3, result.stderr  # one is missing
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "summarization", "acme/summariser:", "exists,", "not", "gated;", "providers:", "hf-inference",
        "(live,", "summarization);", "local:", "yes",
    ]  # fmt: skip
    assert (
        "acme/painter: exists, gated (manual); providers: fal-ai (staging, text-to-image), replicate (live, "
        in lines[1]
    )
    assert lines[1].endswith("; the Hub tags it text-to-image: does it do summarization?")
    assert "the Hub tags it" not in lines[0]
    assert lines[2].endswith("acme/gone: MISSING (not on the Hub, or private)")
    assert lines[-1] == "checked 3: 1 missing, 1 gated, 2 served live by a provider, 2 runnable locally"
    # (refresh's file listings, asked earlier in this module, have blobs=true)
    asked = [r for r in hub.requests if r["path"].startswith("/api/models/") and "blobs" not in r["query"]]
    assert {r["path"] for r in asked} == {
        "/api/models/acme/summariser",
        "/api/models/acme/painter",
        "/api/models/acme/gone",
    }
    assert set(asked[0]["query"]["expand"]) == {
        "gated",
        "inferenceProviderMapping",
        "library_name",
        "pipeline_tag",
        "siblings",
    }


def test_check_reports_an_entry_that_is_not_a_pipeline_for_its_task():
    models = [
        HubModel(  # a VAE checkpoint tagged text-to-image: no pipeline to load
            "acme/vae-original",
            "text-to-image",
            downloads=5,
            library_name="diffusers",
            files={"vae.ckpt": 334_000_000, "README.md": 100},
        ),
        HubModel(
            "acme/pipeline",
            "text-to-image",
            downloads=4,
            library_name="diffusers",
            files={"model_index.json": 500, "unet/config.json": 900},
        ),
    ]
    with FakeHub(models) as hub:
        result = catalog_cli(
            hub.url, "check", "acme/vae-original", "acme/pipeline", "--task", "text-to-image"
        )
    assert result.returncode == 0, result.stderr
    vae, pipeline, summary = result.stdout.splitlines()
    assert vae.endswith(
        "acme/vae-original: exists, not gated; providers: none; local: yes; NOT A PIPELINE: no "
        "model_index.json (a checkpoint, not a diffusers pipeline for its task)"
    ), vae
    assert "NOT A PIPELINE" not in pipeline
    assert summary.endswith(", 1 not a pipeline")


def test_check_a_task_of_the_catalog_as_json(hub, tmp_path):
    user = tmp_path / "mine.jsonl"
    folder = tmp_path / "my-sum"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    entries = [
        {"id": "acme/tiny-sum", "task": "summarization", "downloads": 10**9},
        {"id": "my-sum", "task": "summarization", "path": str(folder), "downloads": 10**9 - 1},
    ]
    user.write_text("".join(json.dumps(e) + "\n" for e in entries))
    before = len(hub.requests)
    result = catalog_cli(
        hub.url, "check", "--task", "summarization", "-k", "3", "--json", "--catalog", str(user)
    )
    assert result.returncode == 3, result.stderr  # the third of the shipped catalog's is not on the fake Hub
    rows = json.loads(result.stdout)
    assert [(r["id"], r["exists"]) for r in rows][:2] == [("acme/tiny-sum", True), ("my-sum", True)]
    tiny, mine, shipped = rows
    assert tiny == {
        "id": "acme/tiny-sum", "task": "summarization", "in_catalog": True, "exists": True, "gated": False,
        "providers": [], "live_providers": [], "library": "transformers", "local": True, "error": None,
        "not_on_hub": None,
        "hub_task": "summarization",
        "not_a_pipeline": None,  # its files were not listed: not known
    }  # fmt: skip
    assert mine["not_on_hub"] == f"a local folder ({folder})" and mine["local"] is True  # not asked
    assert shipped["in_catalog"] and shipped["exists"] is False
    asked = sorted(r["path"] for r in hub.requests[before:])  # asked a few at a time: any order
    assert asked == sorted(["/api/models/acme/tiny-sum", f"/api/models/{shipped['id']}"])


def test_check_reports_a_hub_error_for_one_model_and_goes_on(hub):
    result = catalog_cli(hub.url, "check", "acme/flaky", "acme/chat")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("acme/flaky: could not check (HTTP 500)")
    assert "acme/chat: exists" in lines[1] and "Traceback" not in result.stderr


def test_check_does_not_ask_the_hub_about_built_in_annotators(hub):
    before = len(hub.requests)
    result = catalog_cli(hub.url, "check", "canny-edge-detector")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].endswith(
        "canny-edge-detector: built into the local runtime (no weights), not a Hub model; local: yes"
    )
    assert len(hub.requests) == before


def test_check_of_named_models_needs_the_hub(tmp_path):
    result = catalog_cli(None, "check", "acme/x", offline=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("error: cannot reach the Hugging Face Hub at ")
    assert "HF_HUB_OFFLINE=1" in result.stderr and "Traceback" not in result.stderr


def test_check_with_no_model_named_checks_every_entry_offline(tmp_path):
    shipped = catalog_cli(None, "check", offline=True)
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    note, last = shipped.stdout.strip().splitlines()
    assert re.fullmatch(r"checked \d+ entries: 0 problems", last)
    # the sizes and licences that estimates and limits read: counted, not a problem
    assert re.fullmatch(r"note: \d+ of \d+ Hub models have no size and \d+ no licence: .*refresh.*", note)
    user = tmp_path / "mine.jsonl"
    entries = [
        {
            "id": "pyannote/speaker-diarization",
            "task": "automatic-speech-recognition",
            "library": "pyannote-audio",
        },
        {"id": "acme/vad-diarization", "task": "automatic-speech-recognition", "library": "transformers"},
        {"id": "acme/whisper", "task": "automatic-speech-recognition", "languages": ["en", "False"]},
    ]
    user.write_text("".join(json.dumps(e) + "\n" for e in entries))
    result = catalog_cli(None, "check", "--catalog", str(user), offline=True)
    assert result.returncode == 3, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert (
        "pyannote/speaker-diarization: listed for automatic-speech-recognition, but pyannote-audio"
        in lines[0]
    )
    assert lines[1].endswith(
        "acme/vad-diarization: listed for automatic-speech-recognition, but its name says diarization"
    )
    assert "acme/whisper: languages list 'False'" in lines[2]
    counts = [[int(n) for n in re.findall(r"\d+", line.split(":")[1])] for line in (note, lines[3])]
    assert [b - a for a, b in zip(*counts, strict=True)] == [3, 3, 3]  # the 3 entries without either
    assert lines[-1].endswith("entries: 3 problems")
