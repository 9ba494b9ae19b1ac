"""ZeroGPU support: on a Space with ZeroGPU hardware, local model calls must run inside a function
decorated with `spaces.GPU`. Where the `spaces` package is absent this is a no-op; where it is
present but the hardware is not ZeroGPU, `spaces.GPU` itself does nothing.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hugginggpt.artifacts import Artifact
from hugginggpt.catalog import ModelCard
from hugginggpt.endpoints import Endpoint, StopSignal

GPU_SECONDS = 120  # the longest one model call may hold the GPU


def _run(
    endpoint: Endpoint, task: str, model: ModelCard, inputs: dict[str, Any], out_dir: Path
) -> list[Artifact]:
    return endpoint.run(task, model, inputs, out_dir)


def on_gpu(endpoint: Endpoint, context: contextvars.Context | None = None) -> Endpoint:
    """`endpoint` with its runs wrapped in `spaces.GPU`, or `endpoint` itself without `spaces`.

    `context`: the context of the Gradio request (contextvars.copy_context() in the handler);
    spaces.GPU reads the request from it, and the scheduler's worker threads do not inherit it.
    """
    try:
        import spaces
    except ImportError:
        return endpoint
    return GPUEndpoint(endpoint, spaces.GPU(duration=GPU_SECONDS)(_run), context)


class GPUEndpoint(Endpoint):
    def __init__(
        self,
        inner: Endpoint,
        runner: Callable[..., list[Artifact]],
        context: contextvars.Context | None = None,
    ):
        self.inner = inner
        self.runner = runner
        self.context = context
        self.name = inner.name

    def describe(self) -> str:
        return self.inner.describe() + " on ZeroGPU"

    def can_run(self, model: ModelCard) -> bool:
        return self.inner.can_run(model)

    def run(
        self,
        task: str,
        model: ModelCard,
        inputs: dict[str, Any],
        out_dir: Path,
        *,
        stop: StopSignal | None = None,
    ) -> list[Artifact]:
        # `stop` stays here: ZeroGPU runs the call in another process, which would not see it set.
        if self.context is None:
            return self.runner(self.inner, task, model, inputs, out_dir)
        # A copy per call: one Context cannot be entered by two threads at once.
        return self.context.copy().run(self.runner, self.inner, task, model, inputs, out_dir)
