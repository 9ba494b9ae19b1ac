"""Replay: a trace made with tiny local models runs again to identical outputs, with no planning and
no selection call; a changed seed shows up as different outputs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fakes.llm_server import FakeLLMServer
from tiny_vision import draw_photo

from hugginggpt.commands.cli import main
from models_local.handlers import diffusion

PLAN = [
    {"task": "text-to-image", "id": 0, "dep": [-1], "args": {"text": "a red cat"}},
    {"task": "image-classification", "id": 1, "dep": [0], "args": {"image": "<resource>-0"}},
    {"task": "text-classification", "id": 2, "dep": [-1], "args": {"text": "a good cat"}},
    {"task": "image-classification", "id": 3, "dep": [-1], "args": {"image": "photo.png"}},
]


def run(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def original(tiny, tiny_sd, tiny_vit, tmp_path_factory):
    """One run with tiny local models, made once for the module: its trace is what each test replays
    (none of them changes the run's folder or its trace)."""
    folder = tmp_path_factory.mktemp("original")
    cards = [
        {"id": "tiny/sd", "task": "text-to-image", "path": tiny_sd, "library": "diffusers"},
        {"id": "tiny/vit", "task": "image-classification", "path": tiny_vit, "library": "transformers"},
        {
            "id": "tiny/cls",
            "task": "text-classification",
            "path": tiny("bert-classifier"),
            "library": "transformers",
        },
    ]
    catalog = folder / "mine.jsonl"
    catalog.write_text("".join(json.dumps({**c, "local": True, "downloads": 10**12}) + "\n" for c in cards))
    photo = draw_photo(folder / "photo.png")
    with pytest.MonkeyPatch.context() as patch, FakeLLMServer() as server:
        patch.setattr(diffusion, "STEPS", 2)
        server.script("plan", json.dumps(PLAN)).script("respond", "Here you are.")
        llm = ["--llm-base-url", server.url, "--llm-model", "fake", "--llm-api-key", "sk-x"]
        common = [*llm, "--inference", "local", "--catalog", str(catalog)]
        code, out, err = run(
            *common, "--workdir", str(folder / "ws"), "--file", photo, "--json", "draw and label"
        )
        assert code == 0, err
        yield server, common, Path(json.loads(out)["trace_file"])


@pytest.fixture
def setup(original):
    server, common, trace_file = original
    server.reset()
    server.script("respond", "Here you are again.")
    return server, common, trace_file


def test_replay_reproduces_identical_outputs_with_no_planning_or_selection_call(setup):
    server, common, trace_file = setup
    code, out, err = run("replay", str(trace_file), *common, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert server.stages() == ["respond"] and result["llm_calls"] == 1  # the answer only
    assert result["same"] is True and [t["match"] for t in result["tasks"]] == [True] * 4
    assert result["answer"] == "Here you are again."
    assert err.count("[done]") == 1, err  # the run's summary, once
    original = json.loads(trace_file.read_text())
    replayed = json.loads(Path(result["trace_file"]).read_text())
    assert replayed["replay_of"] == original["request_id"] != replayed["request_id"]
    assert [t["cached"] for t in replayed["tasks"]] == [False] * 4  # every task ran again
    assert [t["seed"] for t in replayed["tasks"]] == [t["seed"] for t in original["tasks"]]
    assert original["tasks"][0]["seed"] is not None
    assert err.count("same outputs") == 4


def test_replay_runs_through_the_same_rerun_path_as_the_app(setup, monkeypatch):
    from hugginggpt.run.pipeline import Pipeline

    calls = []
    rerun = Pipeline.rerun

    def spy(self, previous, edits=None, **kwargs):
        calls.append(kwargs["header"])
        return rerun(self, previous, edits, **kwargs)

    monkeypatch.setattr(Pipeline, "rerun", spy)  # test_review_chat checks the app's calls
    _, common, trace_file = setup
    code, _, err = run("replay", str(trace_file), *common, "--json", "--no-answer")
    assert code == 0, err
    assert calls == [{"replay_of": json.loads(trace_file.read_text())["request_id"]}]


def test_replay_without_the_answer_makes_no_llm_call_and_runs_in_another_folder(setup, tmp_path):
    server, common, trace_file = setup
    code, out, err = run(
        "replay", str(trace_file), *common, "--no-answer", "--json", "--workdir", str(tmp_path / "elsewhere")
    )
    assert code == 0, err
    result = json.loads(out)
    assert server.requests == [] and result["outcome"] == "executed" and result["same"] is True
    assert (tmp_path / "elsewhere" / "uploads" / "photo.png").is_file()  # the upload came along
    assert str(tmp_path / "elsewhere") in result["trace_file"]


def test_a_changed_seed_is_reported_as_different_outputs(setup, tmp_path):
    server, common, trace_file = setup
    trace = json.loads(trace_file.read_text())
    trace["tasks"][0]["seed"] += 1
    edited = trace_file.with_name("edited.json")
    edited.write_text(json.dumps(trace))
    code, out, err = run("replay", str(edited), *common, "--no-answer", "--json")
    assert code == 1
    matches = [t["match"] for t in json.loads(out)["tasks"]]
    assert matches[0] is False and matches[2:] == [True, True]  # the drawing changed; the rest did not
    assert "DIFFERENT outputs" in err


@pytest.mark.parametrize(
    "content, words", [(None, "cannot read"), ("[1, 2]", "not a trace"), ("{", "not a JSON")]
)
def test_replay_of_something_that_is_no_trace_is_bad_usage(tmp_path, content, words):
    path = tmp_path / "trace.json"
    if content is not None:
        path.write_text(content)
    code, _, err = run("replay", str(path), "--no-answer")
    assert code == 2 and words in err and "Traceback" not in err
