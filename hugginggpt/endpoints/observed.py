"""Every task attempt, observed: an `execute_tool` span (task type, model, where it ran, cached,
seed, outcome, bytes in and out; arguments and results under trace_content) current while the
model runs, so that a call to the expert server carries its
`traceparent`; and the task metrics (hugginggpt.observability.metrics)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hugginggpt.catalog import ModelCard
from hugginggpt.endpoints.base import Call, Endpoint, EndpointError, Result, WrappedEndpoint
from hugginggpt.files.artifacts import Artifact
from hugginggpt.observability import metrics, telemetry


class ObservedEndpoint(WrappedEndpoint):
    def __init__(self, inner: Endpoint, *, where: str) -> None:
        """`where`: the name reported for a call that failed (no result says who answered)."""
        super().__init__(inner)
        self.where = where

    def run(self, task: str, model: ModelCard, inputs: dict[str, Any], call: Call) -> Result:
        with telemetry.tool_span(task, call.out_dir.name) as (span, content):
            return self._run(span, content, task, model, inputs, call)

    def _run(
        self, span: Any, content: bool, task: str, model: ModelCard, inputs: dict[str, Any], call: Call
    ) -> Result:
        started = time.perf_counter()
        outcome, result = "failed", None
        try:
            result = self.inner.run(task, model, inputs, call)
            outcome = "done"
            return result
        except EndpointError as exc:
            if call.stop is not None and call.stop.is_set():
                outcome = "stopped"
            if span is not None:
                from opentelemetry.trace import Status, StatusCode

                span.set_status(
                    Status(StatusCode.ERROR, str(exc)[:500] if content else "task attempt failed")
                )
            raise
        finally:
            where = result.answered_by if result is not None else self.where
            cached = result is not None and result.cached
            outputs = result.outputs if result is not None else None
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
