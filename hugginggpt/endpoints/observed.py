"""Every task attempt, observed: a span (task type, model, where it ran, cached, seed, outcome,
bytes in and out) current while the model runs, so that a call to the expert server carries its
`traceparent`; and the task metrics (hugginggpt.metrics)."""

from __future__ import annotations

import contextvars
import json
import time
from pathlib import Path
from typing import Any

from .. import metrics, telemetry
from ..artifacts import Artifact
from ..catalog import ModelCard
from .base import Endpoint, EndpointError, StopSignal, WrappedEndpoint

# Which backend answered the call this context is making: set by the router (ran_on).
_ANSWERED_BY: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("answered_by", default=None)


def ran_on(backend: str) -> None:
    """Called by an endpoint that routes between backends, with the one that answered."""
    answered = _ANSWERED_BY.get()
    if answered is not None:
        answered.append(backend)


class ObservedEndpoint(WrappedEndpoint):
    def __init__(self, inner: Endpoint, *, where: str) -> None:
        """`where`: the name reported when no router says which backend answered."""
        super().__init__(inner)
        self.where = where

    def run(
        self,
        task: str,
        model: ModelCard,
        inputs: dict[str, Any],
        out_dir: Path,
        *,
        stop: StopSignal | None = None,
    ) -> list[Artifact]:
        t = telemetry.tracer()
        if t is None:
            return self._run(None, task, model, inputs, out_dir, stop)
        with t.start_as_current_span(f"execute_tool {task}", record_exception=False) as span:
            return self._run(span, task, model, inputs, out_dir, stop)

    def _run(
        self, span: Any, task: str, model: ModelCard, inputs: dict[str, Any], out_dir: Path, stop: Any
    ) -> list[Artifact]:
        answered: list[str] = []
        token = _ANSWERED_BY.set(answered)
        started = time.perf_counter()
        outcome, outputs, where = "failed", None, self.where
        try:
            outputs = self.inner.run(task, model, inputs, out_dir, stop=stop)
            outcome = "done"
            return outputs
        except EndpointError as exc:
            if stop is not None and stop.is_set():
                outcome = "stopped"
            if span is not None:
                from opentelemetry.trace import Status, StatusCode

                span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
            raise
        finally:
            _ANSWERED_BY.reset(token)
            cached = bool(getattr(outputs, "from_cache", False))
            where = "cache" if cached else (answered[-1] if answered else self.where)
            seconds = time.perf_counter() - started
            metrics.task_ran(task, where, outcome, seconds)
            if span is not None:
                span.set_attributes(
                    {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": task,
                        "hugginggpt.task": task,
                        "hugginggpt.model": model.id,
                        "hugginggpt.where": where,
                        "hugginggpt.cached": cached,
                        "hugginggpt.outcome": outcome,
                        "hugginggpt.bytes_in": _size(inputs.values()),
                        "hugginggpt.bytes_out": _size(outputs or ()),
                    }
                )
                if "seed" in inputs:
                    span.set_attribute("hugginggpt.seed", int(inputs["seed"]))


def _size(values: Any) -> int:
    """Bytes of the files and values a model took or made (text as UTF-8, data as JSON)."""
    total = 0
    for v in values:
        if isinstance(v, Artifact):
            v = v.path if v.path is not None else v.value
        if isinstance(v, Path):
            try:
                total += v.stat().st_size
            except OSError:
                pass
        elif isinstance(v, str):
            total += len(v.encode("utf-8", "replace"))
        elif v is not None:
            total += len(json.dumps(v, default=str))
    return total
