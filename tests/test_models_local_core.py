"""The local runtime itself: sizing, budget, LRU eviction, one load under concurrency, refusals, io."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from fakes.serving import POLL_SECONDS
from tiny_text_audio import write_tone

import models_local
from models_local import ModelTooLarge, Runtime, RuntimeUnsupported
from models_local.handlers import HANDLERS
from models_local.handlers.base import Handler
from models_local.io import read_audio, read_image
from models_local.sizing import folder_size, loaded_size

TEXT = {"text": "the cat sat on the mat"}
QA = {"text": "where is the cat?", "context": "the cat sat on the mat"}


def _sizes(tiny, *names):
    return [folder_size(Path(tiny(n)), half=False) for n in names]


def test_size_estimate_from_safetensors_header_matches_loaded_model(tiny):
    folder = tiny("bert-classifier")
    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    runtime.run("text-classification", folder, TEXT, tiny.root / "out")
    estimate = folder_size(Path(folder), half=False)
    (entry,) = runtime._cache.entries.values()
    assert runtime.used == loaded_size(entry.obj)
    # the header counts the saved tensors; the loaded model adds a few non-persistent buffers
    assert 0.95 * runtime.used <= estimate <= runtime.used
    assert folder_size(Path(folder), half=True) == estimate // 2  # float32 weights counted at fp16


def test_small_budget_evicts_least_recently_used(tiny):
    a, b, c = tiny("bert-classifier"), tiny("bert-qa"), tiny("bert-embedder")
    budget = int(sum(_sizes(tiny, "bert-classifier", "bert-qa", "bert-embedder")) * 0.8)  # room for two
    runtime = Runtime(memory_budget_bytes=budget, device="cpu")
    out = tiny.root / "out"
    runtime.run("text-classification", a, TEXT, out)
    runtime.run("question-answering", b, QA, out)
    runtime.run("text-classification", a, TEXT, out)  # a is now the most recently used
    assert runtime.cached() == [b, a] and runtime.loads == 2
    runtime.run("sentence-similarity", c, {"text": "a cat", "text2": "a dog"}, out)
    assert runtime.cached() == [a, c]  # b, least recently used, was dropped
    assert runtime.used <= budget
    runtime.run("question-answering", b, QA, out)  # evicted models load again
    assert runtime.loads == 4 and runtime.cached() == [c, b]


def test_model_over_budget_is_refused_before_loading(tiny):
    folder = tiny("bert-classifier")
    (size,) = _sizes(tiny, "bert-classifier")
    runtime = Runtime(memory_budget_bytes=size - 1, device="cpu")
    assert not runtime.can_run("text-classification", folder)
    with pytest.raises(ModelTooLarge, match="budget"):
        runtime.run("text-classification", folder, TEXT, tiny.root / "out")
    assert runtime.loads == 0 and runtime.cached() == []
    assert isinstance(ModelTooLarge("x"), RuntimeUnsupported)  # callers may catch either
    assert runtime.can_run("text-classification", "any/model", size_bytes=size - 1)
    assert not runtime.can_run("text-classification", "any/model", size_bytes=size)


def test_loads_evictions_and_refusals_are_logged_for_the_operator(tiny, caplog):
    import logging
    import re

    a, b = tiny("bert-classifier"), tiny("bert-qa")
    budget = int(max(_sizes(tiny, "bert-classifier", "bert-qa")) * 1.5)  # room for one model only
    runtime = Runtime(memory_budget_bytes=budget, device="cpu")
    out = tiny.root / "out"
    with caplog.at_level(logging.INFO, logger="models_local"):
        runtime.run("text-classification", a, TEXT, out)
        runtime.run("question-answering", b, QA, out)  # evicts a
        with pytest.raises(RuntimeUnsupported):
            runtime.run("make-coffee", a, TEXT, out)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    size_and_seconds = r"\(\d+ MiB.*\d+\.\d+ s"
    loads = [m for m in lines if m.startswith("loaded ")]
    assert [m.split()[1] for m in loads] == [a, b]
    assert all(re.search(r"in \d+\.\d+ s \(\d+ MiB", m) for m in loads), loads
    (evicted,) = [m for m in lines if m.startswith("evicted ")]
    assert evicted.startswith(f"evicted {a} ") and re.search(size_and_seconds, evicted), evicted
    (refused,) = [m for m in lines if m.startswith("refused ")]
    assert "make-coffee" in refused and "no handler" in refused


def test_concurrent_first_use_loads_once(tiny):
    folder = tiny("bert-classifier")
    real = HANDLERS["text-classification"]
    started = []

    def slow_load(source, device):  # the real loader, slowed so that the four requests overlap
        started.append(source)
        threading.Event().wait(0.3)
        return real.load(source, device)

    runtime = Runtime(
        memory_budget_bytes=2**30,
        device="cpu",
        handlers={"text-classification": Handler(slow_load, real.call)},
    )
    barrier = threading.Barrier(4)
    results, errors = [], []

    def ask():
        barrier.wait()
        try:
            results.append(runtime.run("text-classification", folder, TEXT, tiny.root / "out"))
        except Exception as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert len(started) == 1 and runtime.loads == 1
    assert len(results) == 4 and all(r[0]["kind"] == "text" for r in results)


def test_unsupported_task_and_model_raise_runtime_unsupported(tiny):
    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    out = tiny.root / "out"
    with pytest.raises(RuntimeUnsupported, match="no handler"):
        runtime.run("make-coffee", tiny("bert-classifier"), TEXT, out)
    odd = tiny.root / "odd-model"
    odd.mkdir(exist_ok=True)
    (odd / "config.json").write_text('{"model_type": "no-such-architecture"}')
    with pytest.raises(RuntimeUnsupported, match="cannot load"):
        runtime.run("text-classification", str(odd), TEXT, out)
    with pytest.raises(RuntimeUnsupported, match="Hub or its cache"):  # offline and not cached
        runtime.run("text-classification", "nobody/not-a-cached-model", TEXT, out)
    with pytest.raises(RuntimeUnsupported, match="text-to-speech"):  # a text model asked to speak
        runtime.run("text-to-speech", tiny("t5"), TEXT, out)
    assert runtime.loads == 0


def test_can_run_never_loads(tiny):
    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    folder = tiny("bert-classifier")
    assert runtime.can_run("text-classification", folder)
    assert runtime.can_run("sentence-similarity", folder, library="sentence-transformers")
    assert runtime.can_run("text-classification", "not/cached-anywhere")  # size unknown: allowed
    assert not runtime.can_run("text-classification", folder, library="diffusers")
    assert not runtime.can_run("tabular-classification", folder, library="keras")
    assert not runtime.can_run("make-coffee", folder)
    assert runtime.loads == 0 and runtime.cached() == []


def test_tasks_sharing_a_loader_share_one_loaded_model(tiny):
    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    folder = tiny("t5")
    for task in ("summarization", "translation", "text2text-generation"):
        runtime.run(task, folder, TEXT, tiny.root / "out")
    runtime.run("summarization", folder + "/", TEXT, tiny.root / "out")  # same folder, spelled differently
    assert runtime.loads == 1 and len(runtime.cached()) == 1


def test_builtin_handlers_need_no_files(tmp_path):
    """A weightless handler (library "builtin", e.g. an edge detector) runs by name, without a lookup."""
    calls = []

    def load(source, device):
        calls.append(source)
        return source.upper()

    runtime = Runtime(
        memory_budget_bytes=1,
        device="cpu",
        handlers={
            "shout": Handler(
                load, lambda obj, inputs, out: out.text(f"{obj}: {inputs['text']}"), library="builtin"
            )
        },
    )
    assert runtime.can_run("shout", "edge-detector", library="builtin")
    assert not runtime.can_run("shout", "edge-detector", library="transformers")
    assert runtime.run("shout", "edge-detector", {"text": "hi"}, tmp_path) == [
        {"kind": "text", "value": "EDGE-DETECTOR: hi"}
    ]
    assert calls == ["edge-detector"]


def test_hub_id_resolves_through_the_hf_cache(tiny, tmp_path, monkeypatch):
    """An offline hub id loads from the HF cache layout, through the same loader as a folder."""
    from huggingface_hub import constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--tiny-org--bert-classifier"
    shutil.copytree(tiny("bert-classifier"), repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    assert runtime.can_run("text-classification", "tiny-org/bert-classifier")
    artifacts = runtime.run("text-classification", "tiny-org/bert-classifier", TEXT, tmp_path / "out")
    assert {a["kind"] for a in artifacts} == {"text", "data"}
    small = Runtime(memory_budget_bytes=1000, device="cpu")  # sized from the cached snapshot
    assert not small.can_run("text-classification", "tiny-org/bert-classifier")


def test_module_level_api_and_configure(tiny, monkeypatch):
    monkeypatch.setenv("HUGGINGGPT_LOCAL_MEMORY_GB", "0.5")
    models_local.configure()
    try:
        assert models_local.default_runtime().budget == 2**29
        models_local.configure(memory_budget_bytes=50_000, device="cpu")
        runtime = models_local.default_runtime()
        assert runtime.budget == 50_000 and runtime.device.name == "cpu"
        assert str(runtime.device.dtype) == "torch.float32"
        assert not models_local.can_run("text-classification", tiny("bert-classifier"))  # ~90 KB > 50 KB
    finally:
        models_local.configure()
    supported = models_local.SUPPORTED_TASKS
    mine = {
        "text-classification",
        "token-classification",
        "text2text-generation",
        "summarization",
        "translation",
        "question-answering",
        "conversational",
        "text-generation",
        "sentence-similarity",
        "tabular-classification",
        "text-to-speech",
        "automatic-speech-recognition",
        "audio-to-audio",
        "audio-classification",
    }
    assert mine <= supported
    from hugginggpt.tasks import TASKS

    assert supported <= set(TASKS)  # names exactly as in the controller's table


# ---- io ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["wav", "flac", "ogg"])
def test_read_audio_mixes_to_mono_and_resamples(tmp_path, suffix):
    path = write_tone(tmp_path / f"tone.{suffix}", seconds=0.5, rate=22050, channels=2)
    samples = read_audio(path, 16000)
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(len(samples) - 8000) <= 1
    # the 440 Hz tone survives resampling: its spectral peak is still at 440 Hz
    spectrum = np.abs(np.fft.rfft(samples))
    assert abs(np.argmax(spectrum) * 16000 / len(samples) - 440) < 5


def test_read_image_converts_modes(tmp_path):
    from PIL import Image

    rgba = Image.new("RGBA", (4, 3), (255, 0, 0, 0))  # fully transparent red
    rgba.putpixel((0, 0), (0, 0, 255, 255))
    rgba.save(tmp_path / "a.png")
    image = read_image(tmp_path / "a.png")
    assert image.mode == "RGB" and image.size == (4, 3)
    assert image.getpixel((1, 1)) == (255, 255, 255)  # transparency becomes white, not black
    assert image.getpixel((0, 0)) == (0, 0, 255)
    assert read_image(tmp_path / "a.png", mode="L").mode == "L"


# ---- a hub id downloaded from a (fake) Hub: sized first, then fetched ----------------------------


class _FakeHubFiles:
    """Serves one repo's files the way the Hub API does, enough for huggingface_hub.snapshot_download."""

    SHA = "a" * 40

    def __init__(self, repo: str, files: dict[str, bytes]):
        import hashlib
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.repo, self.files, self.log = repo, files, []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, body: bytes, ctype: str, extra: dict | None = None, head: bool = False):
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _route(self, head: bool):
                from urllib.parse import unquote, urlparse

                path = unquote(urlparse(self.path).path)
                hub.log.append((self.command, path))
                api = f"/api/models/{hub.repo}/"
                if path.startswith(api + "revision/"):
                    info = {"id": hub.repo, "sha": hub.SHA, "siblings": [{"rfilename": f} for f in hub.files]}
                    return self._reply(json.dumps(info).encode(), "application/json", head=head)
                if path.startswith(api + "tree/"):
                    tree = [
                        {"type": "file", "path": f, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                        for f, b in hub.files.items()
                    ]
                    return self._reply(json.dumps(tree).encode(), "application/json", head=head)
                prefix = f"/{hub.repo}/resolve/"
                if path.startswith(prefix):
                    name = path[len(prefix) :].split("/", 1)[1]
                    if name in hub.files:
                        body = hub.files[name]
                        etag = '"' + hashlib.sha1(body).hexdigest() + '"'
                        return self._reply(
                            body,
                            "application/octet-stream",
                            {"X-Repo-Commit": hub.SHA, "ETag": etag},
                            head=head,
                        )
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                self._route(head=False)

            def do_HEAD(self):
                self._route(head=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def fetched(self) -> set[str]:
        return {
            p.split("/resolve/", 1)[1].split("/", 1)[1]
            for m, p in self.log
            if m == "GET" and "/resolve/" in p
        }


@pytest.fixture
def fake_hub(tiny, tmp_path, monkeypatch):
    from huggingface_hub import constants

    folder = Path(tiny("bert-classifier"))
    files = {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }
    files["tf_model.h5"] = b"x" * 1000  # another framework's weights: never fetched
    with _FakeHubFiles("tiny-org/remote-bert", files) as hub:
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        monkeypatch.setattr(
            constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}"
        )
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
        yield hub


def test_hub_model_over_budget_is_refused_before_download(fake_hub, tmp_path):
    runtime = Runtime(memory_budget_bytes=10_000, device="cpu")
    with pytest.raises(ModelTooLarge):
        runtime.run("text-classification", "tiny-org/remote-bert", TEXT, tmp_path / "out")
    assert fake_hub.fetched() == set()  # sized from the file listing; nothing was downloaded
    assert runtime.loads == 0


def test_hub_model_downloads_into_the_cache_and_runs(fake_hub, tmp_path):
    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    artifacts = runtime.run("text-classification", "tiny-org/remote-bert", TEXT, tmp_path / "out")
    assert {a["kind"] for a in artifacts} == {"text", "data"}
    assert "model.safetensors" in fake_hub.fetched() and "tf_model.h5" not in fake_hub.fetched()
    assert list((tmp_path / "hub-cache").glob("models--tiny-org--remote-bert/snapshots/*/model.safetensors"))


# ---- torch's process-wide default dtype --------------------------------------------------------


@pytest.fixture
def float32_default():
    """Whatever a failing test leaves behind, the later tests start from float32 again."""
    import torch

    assert torch.get_default_dtype() == torch.float32
    yield
    torch.set_default_dtype(torch.float32)


def test_failed_half_precision_diffusers_load_leaves_the_default_dtype(tmp_path, float32_default):
    """diffusers builds a model under set_default_dtype(float16) and does not set it back when building
    fails; the runtime must, or every later float32 model in the process computes in float16."""
    import torch
    from safetensors.torch import save_file

    from models_local.handlers.base import Device

    folder = tmp_path / "broken-controlnet"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps(
            {
                "_class_name": "ControlNetModel",
                "down_block_types": ["NoSuchBlock2D"],
                "block_out_channels": [8],
                "layers_per_block": 1,
                "cross_attention_dim": 8,
                "norm_num_groups": 4,
            }
        )
    )
    save_file({"w": torch.zeros(2)}, str(folder / "diffusion_pytorch_model.safetensors"))
    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    runtime.device = Device("cpu", torch.float16)  # what a GPU loads in
    with pytest.raises(RuntimeUnsupported, match="NoSuchBlock2D"):
        runtime.run("canny-text-to-image", str(folder), {"image": "x.png", "text": "a cat"}, tmp_path / "out")
    assert torch.get_default_dtype() == torch.float32


def test_overlapping_loads_in_two_dtypes_leave_the_default_dtype(float32_default):
    """Two runtimes load at once, one in float16 and one in float32, each under transformers' own
    local_torch_dtype. Interleaved freely, the second restore puts float16 back for the whole process."""
    import torch
    from transformers.modeling_utils import local_torch_dtype

    from models_local.handlers.base import Device

    half_in, float_in, half_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def load_half(source, device):
        with local_torch_dtype(device.dtype):
            half_in.set()
            float_in.wait(1)  # under the fix the float32 load waits for this one: give up after 1 s
            seen["half"] = torch.get_default_dtype()
        half_out.set()
        return source

    def load_float(source, device):
        half_in.wait(5)
        with local_torch_dtype(device.dtype):
            float_in.set()
            half_out.wait(5)
            seen["float"] = torch.get_default_dtype()
        return source

    def runtime(load, dtype):
        rt = Runtime(
            memory_budget_bytes=1,
            device="cpu",
            handlers={"echo": Handler(load, lambda obj, inputs, out: out.text(obj), library="builtin")},
        )
        rt.device = Device("cpu", dtype)
        return rt

    half, single = runtime(load_half, torch.float16), runtime(load_float, torch.float32)
    threads = [
        threading.Thread(target=rt.run, args=("echo", name, {}, "."))
        for rt, name in ((half, "half"), (single, "float"))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert seen == {"half": torch.float16, "float": torch.float32}  # each model built in its own dtype
    assert torch.get_default_dtype() == torch.float32


def test_a_load_does_not_overlap_a_diffusers_style_empty_weights_load(tiny):
    """diffusers builds under accelerate's init_empty_weights, which patches nn.Module for the whole
    process: a transformers model built meanwhile in another thread gets meta tensors and fails to
    load with "Cannot copy out of meta tensor" (seen as a flaky text-to-speech beside text-to-image)."""
    from accelerate import init_empty_weights

    real = HANDLERS["text-classification"]
    inside, built = threading.Event(), threading.Event()

    def load_empty(source, device):
        with init_empty_weights():
            inside.set()
            built.wait(1)  # under the fix the other load waits for this one: give up after 1 s
        return source

    def load_real(source, device):
        inside.wait(5)
        model = real.load(source, device)
        built.set()
        return model

    empty = Runtime(
        memory_budget_bytes=1,
        device="cpu",
        handlers={"echo": Handler(load_empty, lambda obj, inputs, out: out.text(obj), library="builtin")},
    )
    classify = Runtime(
        memory_budget_bytes=2**30,
        device="cpu",
        handlers={"text-classification": Handler(load_real, real.call)},
    )
    results, errors = [], []

    def run(runtime, task, model, inputs):
        try:
            results.append(runtime.run(task, model, inputs, tiny.root / "out"))
        except Exception as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=(empty, "echo", "empty", {})),
        threading.Thread(target=run, args=(classify, "text-classification", tiny("bert-classifier"), TEXT)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert len(results) == 2


def test_a_model_in_use_is_not_evicted_nor_loaded_twice(tiny):
    """A load that needs room must not drop a model another request is still calling: its memory
    is not freed until the call ends, and a new request for it would load a second copy."""
    a, b = tiny("bert-classifier"), tiny("bert-qa")
    real = HANDLERS["text-classification"]
    calling, release = threading.Event(), threading.Event()

    def slow_call(obj, inputs, out):  # the real call, held open until the test lets it finish
        calling.set()
        release.wait(30)
        real.call(obj, inputs, out)

    budget = int(max(_sizes(tiny, "bert-classifier", "bert-qa")) * 1.5)  # room for one model only
    runtime = Runtime(
        memory_budget_bytes=budget,
        device="cpu",
        handlers={
            "slow": Handler(real.load, slow_call),
            "text-classification": real,
            "question-answering": HANDLERS["question-answering"],
        },
    )
    out = tiny.root / "out"
    second = []
    worker = threading.Thread(target=runtime.run, args=("slow", a, TEXT, out))
    asker = threading.Thread(target=lambda: second.append(runtime.run("text-classification", a, TEXT, out)))
    worker.start()
    try:
        assert calling.wait(30)
        runtime.run("question-answering", b, QA, out)  # needs room while `a` is in use
        assert a in runtime.cached()  # still counted: its memory is still taken
        asker.start()  # another request for `a`: it waits for the copy in use, it loads no second one
        for _ in range(300):
            entries = [e for (_, m), e in runtime._cache.entries.items() if m == a]
            if not asker.is_alive() or (entries and entries[0].users == 2):
                break
            threading.Event().wait(0.05)
        assert runtime.loads == 2
    finally:
        release.set()
        worker.join(30)
        if asker.ident:
            asker.join(30)
    assert len(second) == 1 and second[0][0]["kind"] == "text"
    assert runtime.cached() == [a] and runtime.used <= budget  # back within budget once calls end


def test_git_lfs_pointer_weights_are_refused_not_read(tiny, tmp_path):
    """A repo cloned without git-lfs holds text pointers where the weights should be: their first
    8 bytes, read as a safetensors header length, ask for exabytes (MemoryError, or worse)."""
    folder = tmp_path / "cloned-without-lfs"
    shutil.copytree(tiny("bert-classifier"), folder)
    (folder / "model.safetensors").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:0123abcd\nsize 438000000\n"
    )
    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    assert not runtime.can_run("text-classification", str(folder))
    with pytest.raises(RuntimeUnsupported, match="Git LFS pointer"):
        runtime.run("text-classification", str(folder), TEXT, tmp_path / "out")
    (folder / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    assert not runtime.can_run("text-classification", str(folder))
    with pytest.raises(RuntimeUnsupported, match="no readable safetensors header"):
        runtime.run("text-classification", str(folder), TEXT, tmp_path / "out")
    assert runtime.loads == 0


def test_a_float32_call_never_runs_under_a_float16_load(float32_default):
    """While a float16 load builds its model, torch's default dtype is float16 for every thread: a
    float32 call running then would make its fresh tensors in half precision."""
    import torch
    from transformers.modeling_utils import local_torch_dtype

    from models_local.handlers.base import Device

    loading, called = threading.Event(), threading.Event()
    seen = []

    def load_half(source, device):
        with local_torch_dtype(device.dtype):
            loading.set()
            called.wait(1)  # under the fix the call waits for this load: give up after 1 s
        return source

    def call(obj, inputs, out):
        seen.append(torch.ones(1).dtype)  # what any library code would get from the default
        if len(seen) == 2:  # the call made while the float16 load runs
            called.set()
        out.text(obj)

    single = Runtime(
        memory_budget_bytes=1,
        device="cpu",
        handlers={"echo": Handler(lambda source, device: source, call, library="builtin")},
    )
    single.run("echo", "warm", {}, ".")  # loaded before: what follows is a call only
    half = Runtime(
        memory_budget_bytes=1,
        device="cpu",
        handlers={"echo": Handler(load_half, lambda obj, inputs, out: out.text(obj), library="builtin")},
    )
    half.device = Device("cpu", torch.float16)
    loader = threading.Thread(target=half.run, args=("echo", "half", {}, "."))
    loader.start()
    assert loading.wait(5)
    single.run("echo", "warm", {}, ".")
    loader.join(30)
    assert seen == [torch.float32, torch.float32]
    assert torch.get_default_dtype() == torch.float32
