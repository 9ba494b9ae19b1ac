"""A scripted endpoint for scheduler and pipeline tests: set durations and failures, real files."""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from hugginggpt import tasks as task_types
from hugginggpt.catalog import ModelCard
from hugginggpt.endpoints import Call, Endpoint, EndpointError, Footprint, ModelUnavailable, Result, Stopped
from hugginggpt.files.artifacts import Artifact


@dataclass
class FakeEndpoint(Endpoint):
    """Every task "runs" by sleeping `durations[model]` (default `duration`) and writing outputs
    of the kinds its spec lists. Models in `failing` raise EndpointError, in `unavailable`
    ModelUnavailable; models in `hanging` sleep for `hang` seconds, or until `stop` is set (then they
    raise EndpointError, as a local diffusion call does between two steps)."""

    duration: float = 0.0
    durations: dict[str, float] = field(default_factory=dict)
    failing: set[str] = field(default_factory=set)
    unavailable: set[str] = field(default_factory=set)
    unrunnable: set[str] = field(default_factory=set)
    hanging: set[str] = field(default_factory=set)
    hang: float = 5.0
    name: str = "fake"
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)  # models whose call ended because `stop` was set
    running: int = 0
    peak: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def can_run(self, model: ModelCard) -> bool:
        return model.id not in self.unrunnable

    def run(self, task: str, model: ModelCard, inputs: dict[str, Any], call: Call) -> Result:
        with self._lock:
            self.calls.append((task, model.id, dict(inputs)))
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            if model.id in self.hanging:
                self._hang(model.id, call.stop)
            else:
                time.sleep(self.durations.get(model.id, self.duration))
            if model.id in self.unavailable:
                raise ModelUnavailable(f"{model.id} is not available here")
            if model.id in self.failing:
                raise EndpointError(f"{model.id} crashed")
            return Result(outputs=make_outputs(task, model.id, inputs, call.out_dir), answered_by=self.name)
        finally:
            with self._lock:
                self.running -= 1

    def _hang(self, model: str, stop: Any) -> None:
        end = time.monotonic() + self.hang
        while time.monotonic() < end:
            if stop is not None and stop.is_set():
                with self._lock:
                    self.stopped.append(model)
                raise Stopped(f"{model}: stopped")
            time.sleep(0.01)


@dataclass
class SizedEndpoint(FakeEndpoint):
    """The fake endpoint, with each model's footprint as given: (size, download) in bytes."""

    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)

    def footprint(self, model: ModelCard) -> Footprint:
        size, download = self.sizes.get(model.id, (0, 0))
        return Footprint("local:cpu", download, size, size)


def make_outputs(task: str, model: str, inputs: dict[str, Any], out_dir: Path) -> list[Artifact]:
    """Files whose content depends on the task, the model and the inputs (file inputs by content), as
    a real model's would: a changed input changes what the tasks after it receive."""
    out_dir.mkdir(parents=True, exist_ok=True)
    made_of = [task, model] + [
        Path(v).read_bytes().hex() if isinstance(v, Path) and Path(v).is_file() else str(v)
        for _, v in sorted(inputs.items())
    ]
    digest = hashlib.sha256("|".join(made_of).encode()).digest()
    outputs = []
    for kind in task_types.TASKS[task].outputs:
        if kind == "image":
            path = out_dir / f"{model.replace('/', '_')}.png"
            Image.new("RGB", (8, 8), tuple(digest[:3])).save(path)
            outputs.append(Artifact("image", path=path))
        elif kind in ("audio", "video"):
            path = out_dir / f"{model.replace('/', '_')}.{'wav' if kind == 'audio' else 'mp4'}"
            path.write_bytes(b"RIFF" + digest)
            outputs.append(Artifact(kind, path=path))
        elif kind == "text":
            seen = "; ".join(f"{k}={Path(v).name if isinstance(v, Path) else v}" for k, v in inputs.items())
            outputs.append(Artifact("text", value=f"{task} by {model} on {seen}"))
        else:
            outputs.append(Artifact("data", value={"model": model}))
    return outputs


def cards(*specs: tuple[str, str, int]) -> list[ModelCard]:
    return [ModelCard(id=i, task=t, downloads=d, local=True) for i, t, d in specs]
