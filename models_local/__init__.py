"""The local expert runtime: runs Hugging Face models in-process for the controller's task types.

Imports nothing from hugginggpt or gradio; torch and transformers are imported only when a model
is first sized or loaded. README.md, "Where models run", says what it serves.
"""

from __future__ import annotations

import threading
from pathlib import Path

from models_local.cache import ModelTooLarge
from models_local.gate import loading
from models_local.handlers import HANDLERS
from models_local.handlers.base import RuntimeUnsupported, Stopped
from models_local.runtime import Runtime

__all__ = [
    "SUPPORTED_TASKS",
    "ModelTooLarge",
    "Runtime",
    "RuntimeUnsupported",
    "Stopped",
    "can_run",
    "configure",
    "default_runtime",
    "footprint_of",
    "loading",
    "resident",
    "run",
    "warm",
]

_default: Runtime | None = None
_settings: dict = {}
_lock = threading.Lock()

SUPPORTED_TASKS = frozenset(HANDLERS)


def configure(*, memory_budget_bytes: int | None = None, device: str | None = None) -> None:
    """Settings for the process-wide runtime; replaces it (dropping its cached models)."""
    global _default
    with _lock:
        _settings.update(memory_budget_bytes=memory_budget_bytes, device=device)
        _default = None


def default_runtime() -> Runtime:
    global _default
    with _lock:
        if _default is None:
            _default = Runtime(**_settings)
        return _default


def can_run(task: str, model: str, *, library: str | None = None, size_bytes: int | None = None) -> bool:
    return default_runtime().can_run(task, model, library=library, size_bytes=size_bytes)


def footprint_of(model: str) -> dict:
    """{download_bytes, memory_bytes, weights_bytes, device, half, loaded} for `model` on this
    runtime's device, without loading or downloading it (footprint.py). The first three are None for
    a hub model not in the HF cache: the catalog's size stands in for it."""
    from dataclasses import asdict

    from models_local.footprint import local_footprint

    runtime = default_runtime()
    found = local_footprint(model, half=runtime.half)
    loaded = runtime.is_loaded(model)
    return {**asdict(found), "device": runtime.device.name, "half": runtime.half, "loaded": loaded}


def prefetch(model: str, *, progress=None) -> Path:
    """Download a hub model's files into the HF cache (or find its folder) without loading it, e.g.
    before a ZeroGPU call, so that the GPU time is not spent downloading; `progress` as run's."""
    from models_local.hub import locate

    return locate(model, half=False, check_fits=lambda *_: None, progress=progress)[0]


def warm(task: str, model: str) -> None:
    """Load `model` for `task` into the process-wide runtime's cache (within its memory budget)."""
    default_runtime().warm(task, model)


def run(
    task: str,
    model: str,
    inputs: dict[str, str],
    out_dir: str | Path,
    *,
    stop=None,
    seed: int | None = None,
    progress=None,
) -> list[dict]:
    return default_runtime().run(task, model, inputs, out_dir, stop=stop, seed=seed, progress=progress)


def resident() -> tuple[int, int]:
    """(models loaded, their bytes) in the process-wide runtime; (0, 0) before it exists."""
    runtime = _default
    return (0, 0) if runtime is None else (len(runtime.cached()), runtime.used)
