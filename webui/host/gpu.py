"""ZeroGPU, as the `spaces` package expects it.

- `spaces` is imported here, and app.py imports this module before anything that touches torch:
  `spaces` refuses to work once CUDA was initialised.
- The GPU function is decorated when this module is imported, before `launch()`: `spaces` sets
  ZeroGPU up by hooking the next launch, and only for functions already decorated.
- Its duration is computed per call from what runs (the model's size, the task) within the
  tier's limit; weights are downloaded before the call, in this process, so the GPU time pays only
  for loading from disk and running.
- Off ZeroGPU (no SPACES_ZERO_GPU) `spaces.GPU` returns the function itself: a no-op. Without the
  `spaces` package the same.

Stop cannot reach into ZeroGPU's worker process: the chat moves on at once and the call ends
within its duration, its result dropped.
"""

from __future__ import annotations

import contextvars
import logging
from pathlib import Path
from typing import Any

from hugginggpt import tasks as task_types
from hugginggpt.catalog import ModelCard
from hugginggpt.endpoints import Call, Endpoint, LocalEndpoint, Result, WrappedEndpoint

try:
    import spaces
except ImportError:  # installed without the app's extras: run in-process
    spaces = None

log = logging.getLogger(__name__)

MAX_SECONDS = 120  # the longest one call may hold the GPU (ZeroGPU's tier limit; set by the app)
LOAD_SECONDS_PER_GB = 4  # from disk to the GPU, with margin


def gpu_seconds(task: str, model: ModelCard) -> int:
    """How long a call may hold the GPU: loading the weights plus running the task, at most MAX_SECONDS."""
    size_gb = (model.size_bytes or 2 * 10**9) / 10**9
    spec = task_types.get(task)
    run = spec.gpu_seconds if spec is not None else task_types.TaskSpec.gpu_seconds
    return int(min(MAX_SECONDS, 5 + size_gb * LOAD_SECONDS_PER_GB + run))


def _on_gpu(endpoint: Endpoint, task: str, model: ModelCard, inputs: dict[str, Any], out_dir: Path) -> Result:
    """Runs on the GPU (in ZeroGPU's worker process on a Space)."""
    return endpoint.run(task, model, inputs, Call(out_dir=out_dir))


def _duration(endpoint: Endpoint, task: str, model: ModelCard, inputs: dict[str, Any], out_dir: Path) -> int:
    return gpu_seconds(task, model)


# Decorated at import: before launch(), as ZeroGPU requires.
run_on_gpu = spaces.GPU(duration=_duration)(_on_gpu) if spaces is not None else _on_gpu


def zerogpu_active() -> bool:
    """Whether `spaces` really wraps calls here (a ZeroGPU Space), not just passes them through."""
    return run_on_gpu is not _on_gpu


def visitor_ip_token(context: contextvars.Context | None) -> str | None:
    """The visitor's `x-ip-token` header (set by Hugging Face on a Space), read from the Gradio
    request in `context`: Space tools forward it, so a ZeroGPU Space counts the visitor's quota."""
    from gradio.context import LocalContext

    if context is None:
        return None
    request = context.run(LocalContext.request.get, None)
    headers = getattr(request, "headers", None)
    return headers.get("x-ip-token") if headers is not None else None


def on_gpu(endpoint: Endpoint, context: contextvars.Context | None = None) -> Endpoint:
    """`endpoint` with its runs going through the GPU function, or `endpoint` itself off ZeroGPU."""
    if not zerogpu_active():
        return endpoint
    return GPUEndpoint(endpoint, context)


class GPUEndpoint(WrappedEndpoint):
    def __init__(self, inner: Endpoint, context: contextvars.Context | None = None, runner: Any = None):
        super().__init__(inner)
        self.context = context
        self.runner = runner or run_on_gpu

    def describe(self) -> str:
        return self.inner.describe() + " on ZeroGPU"

    def warm(self, task: str, model: ModelCard) -> bool:
        return False  # ZeroGPU loads in the GPU call's own process: a load here would be wasted

    def run(
        self,
        task: str,
        model: ModelCard,
        inputs: dict[str, Any],
        call: Call,
    ) -> Result:
        if call.stop is not None and call.stop.is_set():
            return self.inner.run(task, model, inputs, call)  # ends at once, as Stopped
        _prefetch(model, call)  # weights on disk before the GPU is held
        # The stop and the progress stay here: ZeroGPU runs the call in another process.
        out_dir = call.out_dir
        if self.context is None:
            return self.runner(self.inner, task, model, inputs, out_dir)
        # A copy per call: one Context cannot be entered by two threads at once. spaces.GPU reads
        # the Gradio request from it; the scheduler's worker threads do not inherit it.
        return self.context.copy().run(self.runner, self.inner, task, model, inputs, out_dir)


def _prefetch(model: ModelCard, call: Call) -> None:
    try:
        LocalEndpoint.prefetch(model, call.progress)
    except Exception as exc:  # noqa: BLE001 (the call itself reports what is wrong, in its words)
        log.info("prefetching %s failed: %s", model.id, exc)
