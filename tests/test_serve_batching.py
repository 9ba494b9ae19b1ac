"""Concurrent calls to one model run as one batch (models_local/batching.py), in the runtime that
the expert server and the app share: tiny Stable Diffusion, ViT and BLIP, real pipelines.

The model is held busy by a first call that waits on a gate (a wrapped handler), so that the calls
started meanwhile queue up and, once the gate opens, run as batches the test can count."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from tiny_vision import draw_photo

from models_local import Runtime, Stopped
from models_local.device import CpuThreads
from models_local.handlers import HANDLERS, diffusion
from models_local.handlers.base import Batching, Handler

WAIT_S = 60.0  # generous: the machine is shared and loaded


@pytest.fixture(autouse=True)
def few_steps(monkeypatch):
    monkeypatch.setattr(diffusion, "STEPS", 2)


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> list[str]:
    folder = tmp_path_factory.mktemp("photos")
    return [draw_photo(folder / f"photo{i}.png", size=(40 + 8 * i, 40)) for i in range(4)]


class Gated:
    """A runtime whose `task` handler holds its first call until open() and records every batch
    (the inputs that ran together)."""

    def __init__(self, task: str, **options) -> None:
        self.task, self.entered, self.gate = task, threading.Event(), threading.Event()
        self.batches: list[list[dict]] = []
        self.threads: list[int] = []  # torch's threads each batch ran on
        original = HANDLERS[task]
        assert original.batch is not None

        def call(obj, inputs, out):
            if not self.entered.is_set():
                self.entered.set()
                assert self.gate.wait(WAIT_S)
            self.batches.append([inputs])
            self.threads.append(torch.get_num_threads())
            original.call(obj, inputs, out)

        def call_many(obj, inputs, outs):
            self.batches.append(list(inputs))
            self.threads.append(torch.get_num_threads())
            original.batch.call(obj, inputs, outs)

        gated = replace(original, call=call, batch=replace(original.batch, call=call_many))
        self.runtime = Runtime(device="cpu", batch_window_s=0.05, handlers={task: gated}, **options)

    def hold(self, model: str, inputs: dict[str, str], out: Path) -> threading.Thread:
        """Start the call that holds the model; returns once it runs."""
        thread = threading.Thread(target=self.runtime.run, args=(self.task, model, inputs, out))
        thread.start()
        assert self.entered.wait(WAIT_S)
        return thread

    def queued(self, n: int) -> None:
        end = time.monotonic() + WAIT_S
        while self.runtime.batcher.waiting() < n:
            assert time.monotonic() < end, "the calls did not queue"
            time.sleep(0.01)


def in_threads(calls: dict[str, callable]) -> dict[str, object]:
    """Each call in a thread; its result or the exception it raised, by name."""
    results: dict[str, object] = {}

    def one(name, call):
        try:
            results[name] = call()
        except Exception as exc:
            results[name] = exc

    threads = {name: threading.Thread(target=one, args=(name, call)) for name, call in calls.items()}
    for t in threads.values():
        t.start()
    return results, threads


def pixels(artifacts: list[dict]) -> np.ndarray:
    (image,) = [a for a in artifacts if a["kind"] == "image"]
    with Image.open(image["path"]) as im:
        return np.asarray(im).astype(int)


def test_batched_images_are_the_images_each_seed_draws_alone(tiny_sd, tmp_path):
    alone = Runtime(device="cpu", batch_window_s=0)
    expected = {
        s: pixels(alone.run("text-to-image", tiny_sd, {"text": f"cat {s}"}, tmp_path, seed=s))
        for s in (1, 2, 3)
    }
    assert not np.array_equal(expected[1], expected[2])  # the seeds draw different images

    gated = Gated("text-to-image")
    holder = gated.hold(tiny_sd, {"text": "first"}, tmp_path)
    run = gated.runtime.run
    results, threads = in_threads(
        {
            s: (lambda s=s: run("text-to-image", tiny_sd, {"text": f"cat {s}"}, tmp_path / str(s), seed=s))
            for s in (1, 2, 3)
        }
    )
    gated.queued(3)
    gated.gate.set()
    for t in [holder, *threads.values()]:
        t.join(WAIT_S)
    assert [len(b) for b in gated.batches] == [1, 3]  # the holder alone, then the three as one
    for s in (1, 2, 3):
        # the same image: a batched convolution may round a pixel the other way, never more
        assert np.abs(pixels(results[s]) - expected[s]).max() <= 2
        assert Path(results[s][0]["path"]).parent == (tmp_path / str(s)).resolve()


def test_a_stopped_member_leaves_its_batch_and_the_others_go_on(tiny_sd, tmp_path):
    gated = Gated("text-to-image")
    holder = gated.hold(tiny_sd, {"text": "first"}, tmp_path)
    stop = threading.Event()
    run = gated.runtime.run
    results, threads = in_threads(
        {
            name: (
                lambda name=name: run(
                    "text-to-image",
                    tiny_sd,
                    {"text": name},
                    tmp_path,
                    stop=stop if name == "stopped" else None,
                    seed=1,
                )
            )
            for name in ("a", "b", "stopped")
        }
    )
    gated.queued(3)
    stop.set()
    threads["stopped"].join(WAIT_S)  # it leaves while the model is still held by another call
    assert isinstance(results["stopped"], Stopped) and not gated.gate.is_set()
    gated.gate.set()
    for t in [holder, *threads.values()]:
        t.join(WAIT_S)
    assert [sorted(i["text"] for i in b) for b in gated.batches[1:]] == [["a", "b"]]
    assert [a["kind"] for a in results["a"]] == ["image"] == [a["kind"] for a in results["b"]]


def test_a_bad_input_fails_its_own_call_and_not_the_batch(tiny_vit, photos, tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a picture")
    gated = Gated("image-classification")
    holder = gated.hold(tiny_vit, {"image": photos[0]}, tmp_path)
    run = gated.runtime.run
    images = {"p0": photos[0], "p1": photos[1], "broken": str(broken)}
    results, threads = in_threads(
        {
            name: (lambda path=path: run("image-classification", tiny_vit, {"image": path}, tmp_path))
            for name, path in images.items()
        }
    )
    gated.queued(3)
    gated.gate.set()
    for t in [holder, *threads.values()]:
        t.join(WAIT_S)
    assert type(results["broken"]).__name__ == "UnidentifiedImageError"
    alone = Runtime(device="cpu", batch_window_s=0)
    for name in ("p0", "p1"):
        assert results[name] == alone.run("image-classification", tiny_vit, {"image": images[name]}, tmp_path)
    # the batch of three failed, then each call ran alone
    assert [len(b) for b in gated.batches[1:]] == [3, 1, 1, 1]


def test_calls_with_different_steps_run_in_separate_batches(tiny_sd, tmp_path):
    gated = Gated("text-to-image")
    holder = gated.hold(tiny_sd, {"text": "first"}, tmp_path)
    run = gated.runtime.run
    calls = {(steps, i): {"text": f"cat {i}", "steps": steps} for steps in ("2", "3") for i in range(2)}
    results, threads = in_threads(
        {
            name: (lambda inputs=inputs: run("text-to-image", tiny_sd, inputs, tmp_path, seed=0))
            for name, inputs in calls.items()
        }
    )
    gated.queued(4)
    gated.gate.set()
    for t in [holder, *threads.values()]:
        t.join(WAIT_S)
    assert all(isinstance(r, list) for r in results.values())
    shapes = sorted((len(b), {i["steps"] for i in b}.pop()) for b in gated.batches[1:])
    assert shapes == [(2, "2"), (2, "3")]


def test_captions_batched_are_the_captions_made_alone(tiny_blip, photos, tmp_path):
    alone = Runtime(device="cpu", batch_window_s=0)
    expected = [alone.run("image-to-text", tiny_blip, {"image": p}, tmp_path) for p in photos]
    gated = Gated("image-to-text")
    holder = gated.hold(tiny_blip, {"image": photos[0]}, tmp_path)
    run = gated.runtime.run
    results, threads = in_threads(
        {
            i: (lambda p=p: run("image-to-text", tiny_blip, {"image": p}, tmp_path))
            for i, p in enumerate(photos)
        }
    )
    gated.queued(len(photos))
    gated.gate.set()
    for t in [holder, *threads.values()]:
        t.join(WAIT_S)
    assert [len(b) for b in gated.batches[1:]] == [len(photos)]
    assert [results[i] for i in range(len(photos))] == expected


def test_a_lone_call_runs_at_once_and_says_it_ran_alone(tiny_vit, photos, tmp_path):
    runtime = Runtime(device="cpu", batch_window_s=5.0)  # a window no lone call could sit out
    runtime.run("image-classification", tiny_vit, {"image": photos[0]}, tmp_path)
    sizes: list[int] = []
    started = time.monotonic()
    runtime.run("image-classification", tiny_vit, {"image": photos[0]}, tmp_path, batched=sizes.append)
    assert time.monotonic() - started < 2.5 and sizes == [1]


def test_a_batch_runs_on_the_batch_threads_and_a_lone_call_on_its_own(tiny_vit, photos, tmp_path):
    before = torch.get_num_threads()
    try:
        gated = Gated("image-classification", cpu_threads=CpuThreads(one=1, batch=2))
        run = partial(gated.runtime.run, "image-classification", tiny_vit, out_dir=tmp_path)
        holder = gated.hold(tiny_vit, {"image": photos[0]}, tmp_path)
        results, threads = in_threads({i: partial(run, {"image": p}) for i, p in enumerate(photos[1:3])})
        gated.queued(2)
        gated.gate.set()
        for t in [holder, *threads.values()]:
            t.join(WAIT_S)
        after = threading.Thread(target=run, args=({"image": photos[3]},))  # a thread of its own
        after.start(), after.join(WAIT_S)
        assert [len(b) for b in gated.batches] == [1, 2, 1]
        assert gated.threads == [1, 2, 1]
    finally:
        torch.set_num_threads(before)


def test_batching_rules_key_on_everything_but_what_each_call_brings():
    rules = Batching(lambda *_: None, frozenset({"text", "seed"}), most=lambda pipe: 3)
    assert rules.key({"text": "a", "seed": "1", "steps": "2"}) == rules.key({"text": "b", "steps": "2"})
    assert rules.key({"text": "a", "steps": "2"}) != rules.key({"text": "a", "steps": "3"})
    assert rules.most_for(object()) == 3
    assert isinstance(HANDLERS["text-to-image"], Handler) and HANDLERS["text-to-image"].batch is not None


# ---- through the expert server (in-process backend) ------------------------------------------------


def draw_over_http(url: str, seeds: list[int], steps: int = 2) -> dict[int, tuple[np.ndarray, int]]:
    """Concurrent text-to-image requests, one per seed: each image and the batch size it reports."""
    import io
    import json
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    def one(seed: int) -> tuple[np.ndarray, int]:
        body = {"inputs": f"cat {seed}", "parameters": {"seed": seed, "num_inference_steps": steps}}
        request = urllib.request.Request(
            f"{url}/models/tiny/sd/pipeline/text-to-image",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=WAIT_S) as r:
            size = int(r.headers["x-batch-size"])
            return np.asarray(Image.open(io.BytesIO(r.read())).convert("RGB")).astype(int), size

    with ThreadPoolExecutor(len(seeds)) as pool:
        return dict(zip(seeds, pool.map(one, seeds), strict=True))


def test_the_server_batches_concurrent_requests_and_says_so(served, tmp_path):
    import urllib.request

    seeds = list(range(10, 16))
    got = draw_over_http(served.url, seeds)
    alone = Runtime(device="cpu", batch_window_s=0)
    sd = str((served.root / "tiny/sd").resolve())
    for seed in seeds:
        expected = pixels(
            alone.run("text-to-image", sd, {"text": f"cat {seed}", "steps": "2"}, tmp_path, seed=seed)
        )
        assert np.abs(got[seed][0] - expected).max() <= 2
    sizes = [size for _, size in got.values()]
    assert max(sizes) > 1 and min(sizes) >= 1  # six at once: at least two ran together
    with urllib.request.urlopen(f"{served.url}/metrics", timeout=10) as r:
        metrics = r.read().decode()
    assert 'hugginggpt_expert_batch_size_count{task="text-to-image"}' in metrics
