"""The expert server's parts: which ids it serves, the command that starts it on one machine, how
the Ray application groups tasks and lets models go (without starting Ray)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest
from serve_support import ROOT, models_folder, serve_cli

from models_local import Runtime
from models_local.device import CpuThreads
from models_local.serve.models import ModelTable, UnknownModel
from models_local.serve.settings import ServerSettings


def test_model_ids_name_folders_in_the_models_folder_or_hub_ids_never_paths(
    tmp_path, tiny, tiny_vit, monkeypatch
):
    root = models_folder(tmp_path / "models", {"tiny/vit": tiny_vit, "solo": tiny("bert-classifier")})
    (root / "not-a-model").mkdir()
    table = ModelTable(root, hub=True)
    assert set(table.folders()) == {"tiny/vit", "solo"}
    for folder in ("mine", "mine/inner", "owner/.hidden", "owner/kept"):  # model-looking folders
        (root / folder).mkdir(parents=True)
        (root / folder / "config.json").write_text("{}")
    listed = table.folders()
    assert set(listed) == {"tiny/vit", "solo", "mine", "owner/kept"}
    for model_id in (*listed, "tiny", "not-a-model", "mine/inner", "owner/.hidden", "owner/none"):
        assert table.folder(model_id) == listed.get(model_id), model_id  # the lookup lists the same
    assert table.resolve("tiny/vit") == str((root / "tiny/vit").resolve())
    assert table.resolve("openai/whisper-tiny") == "openai/whisper-tiny"  # the runtime fetches it
    for bad in ("../etc", "/etc/passwd", "a/b/c", "~root", "tiny/..", ""):
        with pytest.raises(UnknownModel, match="not a model id"):
            table.resolve(bad)
    monkeypatch.chdir(tmp_path)  # "models" is a folder here: as an id it would be read as that path
    with pytest.raises(UnknownModel):
        table.resolve("models")
    with pytest.raises(UnknownModel, match="not in this server's models folder"):
        ModelTable(root, hub=False).resolve("openai/whisper-tiny")
    assert ModelTable(root, hub=False).resolve("anything", files=False) == "anything"  # e.g. canny
    assert table.id_of(str((root / "solo").resolve())) == "solo"


def test_a_runtime_lets_a_model_go_unless_a_call_uses_it(tiny, tmp_path):
    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    folder = tiny("bert-classifier")
    runtime.run("text-classification", folder, {"text": "a good cat"}, tmp_path)
    assert runtime.cached() and runtime.drop(folder) is True
    assert runtime.cached() == [] and runtime.drop(folder) is False


def test_server_settings_refuse_what_they_do_not_know(tmp_path):
    with pytest.raises(ValueError, match="unknown server settings: colour"):
        ServerSettings.from_mapping({"colour": "red"})
    with pytest.raises(ValueError, match="not a folder"):
        ServerSettings.from_mapping({"models_dir": str(tmp_path / "nowhere")})
    with pytest.raises(ValueError, match="diffusion_steps"):
        ServerSettings.from_mapping({"diffusion_steps": 0})


def test_python_m_models_local_serve_serves_on_loopback(tmp_path, tiny):
    root = models_folder(tmp_path / "models", {"tiny/bert-cls": tiny("bert-classifier")})
    bad = subprocess.run(
        [sys.executable, "-m", "models_local.serve", "--port", "1", "--models-dir", str(tmp_path / "no")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert bad.returncode == 2 and "not a folder" in bad.stderr
    with serve_cli(["--models-dir", str(root), "--no-hub"]) as url:
        request = urllib.request.Request(
            f"{url}/models/tiny/bert-cls/pipeline/text-classification",
            data=b'{"inputs": "a good cat"}',
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as reply:
            (labels,) = json.loads(reply.read())
        assert len(labels) == 3 and {"label", "score"} <= set(labels[0])
        with urllib.request.urlopen(f"{url}/models", timeout=10) as reply:
            listing = json.loads(reply.read())
        assert listing["hub"] is False and [m["id"] for m in listing["models"]] == ["tiny/bert-cls"]


# ---- the Ray application, without a cluster ----------------------------------------------------------


def test_tasks_go_to_their_runner_group():
    ray_app = pytest.importorskip("models_local.serve.ray_app", reason="Ray Serve is not installed")
    groups = ray_app.parse_groups(None)
    assert ray_app.group_for(groups, "text-to-image") == "heavy"
    assert ray_app.group_for(groups, "canny-text-to-image") == "heavy"  # "*-text-to-image"
    assert ray_app.group_for(groups, "canny-control") == "light"
    assert ray_app.group_for(groups, "automatic-speech-recognition") == "light"
    only = ray_app.parse_groups({"gpu": {"tasks": ["text-to-image"]}})
    assert ray_app.group_for(only, "image-classification") is None  # no group for it: refused
    with pytest.raises(ValueError, match="at most one group"):
        ray_app.parse_groups({"a": {}, "b": {}})
    with pytest.raises(ValueError, match="max_models_per_replica"):
        ray_app.parse_groups({"a": {"max_models_per_replica": 0}})
    assert [g.name for g in groups if g.in_ingress] == ["light"]  # one Serve hop for light tasks
    with pytest.raises(ValueError, match="at most one group may run in_ingress"):
        ray_app.parse_groups({"a": {"in_ingress": True}, "b": {"tasks": ["x"], "in_ingress": True}})
    with pytest.raises(ValueError, match="in_ingress must be"):
        ray_app.parse_groups({"a": {"in_ingress": "yes"}})


def test_a_model_serve_lets_go_is_unloaded_from_the_runtime(tiny, tmp_path):
    ray_app = pytest.importorskip("models_local.serve.ray_app", reason="Ray Serve is not installed")
    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    folder = tiny("bert-classifier")
    runtime.run("text-classification", folder, {"text": "a good cat"}, tmp_path)
    resident = ray_app._Resident(runtime, folder)
    assert hasattr(resident, "__del__")  # what Serve's multiplexer calls when it evicts the model
    resident.__del__()
    assert runtime.cached() == []
    del resident  # garbage collection does not call it again (a later copy of the model stays)
    runtime.run("text-classification", folder, {"text": "a good cat"}, tmp_path)
    assert len(runtime.cached()) == 1


def test_a_jobs_files_live_in_memory_only_where_there_is_room(tmp_path, monkeypatch):
    from models_local.serve import jobs

    monkeypatch.setattr(jobs, "MEMORY_FOLDER", tmp_path)
    jobs.job_folder.cache_clear()
    try:
        monkeypatch.setattr(jobs, "MEMORY_ROOM", 1)
        assert jobs.job_folder() == str(tmp_path)
        jobs.job_folder.cache_clear()
        monkeypatch.setattr(jobs, "MEMORY_ROOM", 2**62)  # more than any disk has free
        assert jobs.job_folder() is None
        jobs.job_folder.cache_clear()
        monkeypatch.setattr(jobs, "MEMORY_FOLDER", tmp_path / "absent")
        monkeypatch.setattr(jobs, "MEMORY_ROOM", 1)
        assert jobs.job_folder() is None
    finally:
        jobs.job_folder.cache_clear()


def test_a_server_leaves_the_http_side_a_core_of_torchs_threads(monkeypatch):
    import torch

    from models_local.serve.__main__ import parser
    from models_local.serve.settings import server_threads

    before = torch.get_num_threads()
    for name in ("torch_threads", "batch_torch_threads"):
        with pytest.raises(ValueError, match="batch_torch_threads must be at least 1"):
            ServerSettings.from_mapping({name: 0})
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert server_threads() == 7
    args = parser().parse_args(["--port", "8000"])
    assert (args.torch_threads, args.batch_torch_threads) == (7, 8)  # a batch's callers wait: all 8
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    assert server_threads() == 1
    try:
        settings = {"torch_threads": 1, "batch_torch_threads": 3, "device": "cpu"}
        assert ServerSettings.from_mapping(settings).runtime().cpu_threads == CpuThreads(one=1, batch=3)
        ServerSettings.from_mapping({"torch_threads": 1, "device": "cpu"}).runtime()
        assert torch.get_num_threads() == 1
        ServerSettings.from_mapping({"torch_threads": 2, "device": "cpu"}).runtime()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
