"""What a task handler is: how to load a model for one task type, and how to call it.

Each family module (text.py, audio.py, vision.py, diffusion.py, controlnet.py, ...) exports
`HANDLERS: dict[str, Handler]`, keyed by the task names of the controller's task table.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Stopped(RuntimeError):
    """The caller asked the running call to stop (Stop pressed, or its time ran out)."""


class RuntimeUnsupported(RuntimeError):
    """This runtime cannot serve this model for this task (the caller may try another)."""


@dataclass(frozen=True)
class Device:
    name: str  # cuda | mps | cpu
    dtype: Any  # a torch.dtype: float16 on GPU, float32 on CPU


@dataclass(frozen=True)
class Batching:
    """How a handler runs several calls of one model at once (models_local/batching.py)."""

    # (loaded object, each call's inputs, each call's outputs) -> None, as Handler.call for many
    call: Callable[[Any, list[dict[str, str]], list[Outputs]], None]
    # inputs that each call brings of its own (a prompt, an image, a seed); calls whose other
    # inputs (steps, a threshold, ...) are all equal may share a batch
    own: frozenset[str]
    # the most calls in one batch: a number, or one worked out from the loaded object (its size)
    most: int | Callable[[Any], int] = 8

    def key(self, inputs: dict[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((k, v) for k, v in inputs.items() if k not in self.own))

    def most_for(self, obj: Any) -> int:
        return self.most if isinstance(self.most, int) else self.most(obj)


@dataclass(frozen=True)
class Handler:
    # (source: hub id or local folder, device) -> the loaded object (a pipeline, or a bundle of
    # model + processor); it is cached by the runtime, keyed by (loader function, source).
    load: Callable[[str, Device], Any]
    # (loaded object, inputs by argument name, outputs) -> None; writes artifacts into `outputs`.
    call: Callable[[Any, dict[str, str], Outputs], None]
    library: str = "transformers"
    batch: Batching | None = None  # None: each call runs alone


@dataclass
class Outputs:
    """Collects a task's artifacts; media files are written under `out_dir`."""

    out_dir: Path
    stem: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    stop: Any = None  # anything with is_set(): long calls check it between steps

    def check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise Stopped("stopped")

    def new_path(self, suffix: str) -> Path:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        n = sum(1 for a in self.artifacts if "path" in a)
        return self.out_dir / f"{self.stem}{'-' + str(n) if n else ''}{suffix}"

    def image(self, image: Any) -> Path:
        """A PIL image, saved as PNG."""
        path = self.new_path(".png")
        image.save(path, format="PNG")
        self.artifacts.append({"kind": "image", "path": str(path)})
        return path

    def audio(self, samples: Any, sampling_rate: int) -> Path:
        """Mono or (frames, channels) float samples, saved as WAV."""
        import numpy as np
        import soundfile as sf

        path = self.new_path(".wav")
        data = np.asarray(samples, dtype=np.float32).squeeze()
        sf.write(path, data.T if data.ndim == 2 and data.shape[0] < data.shape[1] else data, sampling_rate)
        self.artifacts.append({"kind": "audio", "path": str(path)})
        return path

    def file(self, kind: str, path: Path) -> Path:
        """A file the handler wrote itself (e.g. a video) under out_dir."""
        self.artifacts.append({"kind": kind, "path": str(path)})
        return path

    def text(self, value: str) -> None:
        self.artifacts.append({"kind": "text", "value": str(value)})

    def data(self, value: Any) -> None:
        json.dumps(value)  # fail here, not later, when a value is not JSON-serialisable
        self.artifacts.append({"kind": "data", "value": value})


@dataclass(frozen=True)
class Everyone:
    """The stop of a batch: it stops a long run only once every member's stop is set (a member
    stopped alone has its result discarded, models_local/batching.py)."""

    members: list[Outputs]

    @classmethod
    def of(cls, members: list[Outputs]) -> Outputs:
        """Outputs whose stop is the batch's, for the helpers that take one call's (stoppable(),
        stopping_criteria()); it collects nothing."""
        return Outputs(members[0].out_dir, stop=cls(members))

    def is_set(self) -> bool:
        return all(o.stop is not None and o.stop.is_set() for o in self.members)

    def check_stop(self) -> None:
        if self.is_set():
            raise Stopped("stopped")


_SEED_LOCK = threading.Lock()


@contextmanager
def seeded(inputs: dict[str, str]) -> Iterator[None]:
    """Seeds torch's process-wide generator for one call when the inputs carry a "seed", for models
    that draw from it (generate() when sampling, VITS noise, SpeechT5's dropout): they take no
    generator of their own. Seeded calls take turns, and the generator's state is put back after."""
    seed = inputs.get("seed")
    if seed is None:
        yield
        return
    import torch

    devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
    with _SEED_LOCK, torch.random.fork_rng(devices=devices):
        torch.manual_seed(int(seed))  # CPU and CUDA generators; both are put back after
        yield


def stopping_criteria(out: Outputs) -> dict[str, Any]:
    """generate() arguments that end generation at the next token once `out.stop` is set; the
    caller's out.check_stop() after generate() then raises Stopped instead of keeping a cut text."""
    if out.stop is None:
        return {}
    from transformers import StoppingCriteria, StoppingCriteriaList

    stop = out.stop

    class WhenStopped(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            import torch

            return torch.full((input_ids.shape[0],), stop.is_set(), dtype=torch.bool, device=input_ids.device)

    return {"stopping_criteria": StoppingCriteriaList([WhenStopped()])}
