"""A run's trace, built in one place from its typed parts: what the CLI, the app and replay read.

Written as the run goes (after each stage and at the end), so a run that dies mid-way still
leaves what it did.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hugginggpt.llms.interface import LLMCall
from hugginggpt.observability.usage import Usage
from hugginggpt.run.records import TaskRecord
from hugginggpt.stages.plan import Plan
from hugginggpt.stages.planner import PlanOutcome
from hugginggpt.stages.selection import Choice


def build_trace(
    header: dict[str, Any],
    *,
    root: Path,
    planning: PlanOutcome | None = None,
    plan: Plan | None = None,
    choices: dict[int, Choice] | None = None,
    records: Sequence[TaskRecord] = (),
    calls: Sequence[LLMCall] = (),
    timings: dict[str, float] | None = None,
    end: dict[str, Any] | None = None,
    max_field_chars: int = 20_000,
    plan_stream: dict[str, Any] | None = None,
    usage: Usage | None = None,
) -> dict[str, Any]:
    """`header`: request id, request, LLM and endpoint; `end`: outcome, answer and error once known;
    `usage`: the run's, summed from `calls` (Usage.summed) at the operator's prices.

    Every string is cut at `max_field_chars`: a trace stays small whatever the LLM or a model sent."""
    trace: dict[str, Any] = dict(header)
    if planning is not None:
        trace["plan_attempts"] = planning.attempts
        trace["plan_problems"] = planning.problems
        trace["plan_corrections"] = len(planning.problems)  # rejected plans, each answered by a correction
    if plan is not None:
        trace["plan"] = plan.to_json()
        trace["plan_repairs"] = plan.repairs
    if choices is not None:
        trace["choices"] = {str(i): c.to_json() for i, c in choices.items()}
    trace.update(end or {"outcome": "running"})
    trace["tasks"] = [r.to_json(root) for r in records]
    trace["timings"] = {k: round(v, 4) for k, v in (timings or {}).items()}
    if plan_stream is not None:  # streaming execution: when each task was parsed, selected, started
        trace["plan_stream"] = plan_stream
    trace["llm_calls"] = [{**asdict(c), "seconds": round(c.seconds, 4)} for c in calls]
    trace["tokens"] = {
        "prompt": sum(c.usage.prompt_tokens for c in calls),
        "completion": sum(c.usage.completion_tokens for c in calls),
    }
    trace["usage"] = (usage or Usage.summed(calls)).to_json()  # tokens by stage, and their cost
    return _clipped(trace, max_field_chars)


def _clipped(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return (
            value if len(value) <= limit else value[:limit] + f"[... {len(value) - limit:,} characters cut]"
        )
    if isinstance(value, dict):
        return {k: _clipped(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clipped(v, limit) for v in value]
    return value


def write_trace(path: Path, trace: dict[str, Any]) -> None:
    """Replace the file whole (write, then rename), so a reader never sees half a trace."""
    partial = path.with_suffix(".json.part")
    partial.write_text(json.dumps(trace, indent=1, default=str), encoding="utf-8")
    partial.replace(path)
