"""Every task attempt, observed: an `execute_tool` span (task type, model, where it ran, cached,
seed, outcome, bytes in and out; arguments and results under trace_content) current while the
model runs, so that a call to the expert server carries its
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
        with telemetry.tool_span(task, out_dir.name) as (span, content):
            return self._run(span, content, task, model, inputs, out_dir, stop)

    def _run(
        self,
        span: Any,
        content: bool,
        task: str,
        model: ModelCard,
        inputs: dict[str, Any],
        out_dir: Path,
        stop: Any,
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

                span.set_status(
                    Status(StatusCode.ERROR, str(exc)[:500] if content else "task attempt failed")
                )
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
                if content:  # the conventions' opt-in tool content: names and values, never paths
                    span.set_attribute("gen_ai.tool.call.arguments", _shown(inputs))
                    span.set_attribute("gen_ai.tool.call.result", _shown(dict(enumerate(outputs or ()))))


def _shown(values: dict[Any, Any], limit: int = 4000) -> str:
    """Values as JSON for a span: a file as its name, text cut at `limit` characters."""

    def one(v: Any) -> Any:
        if isinstance(v, Artifact):
            return {"kind": v.kind, "file": v.path.name} if v.path is not None else one(v.value)
        if isinstance(v, Path):
            return {"file": v.name}
        return v if isinstance(v, (int, float, bool)) or v is None else str(v)[:limit]

    return json.dumps({str(k): one(v) for k, v in values.items()}, ensure_ascii=False, default=str)[:limit]


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
