"""What a request spent on the controller LLM: tokens by stage and, where the operator set prices
(per million input and output tokens), their cost. The trace, the CLI, the API's `usage` field,
the spans and the metrics all read this one summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Prices:
    """Per million tokens, in the operator's currency; both 0: the cost is unknown (None)."""

    input: float = 0.0
    output: float = 0.0

    def cost(self, input_tokens: int, output_tokens: int) -> float | None:
        if not (self.input or self.output):
            return None
        return round((input_tokens * self.input + output_tokens * self.output) / 1_000_000, 6)


NO_PRICES = Prices()


def summarize(calls: Sequence[Mapping[str, Any]], prices: Prices = NO_PRICES) -> dict[str, Any]:
    """`calls`: the trace's LLM calls ({"stage", "usage": {"prompt_tokens", "completion_tokens"}}).

    {"input_tokens", "output_tokens", "total_tokens", "cost", "by_stage": {stage: {...}}}."""
    by_stage: dict[str, dict[str, Any]] = {}
    for call in calls:
        usage = call.get("usage") or {}
        stage = by_stage.setdefault(str(call.get("stage")), {"input_tokens": 0, "output_tokens": 0})
        stage["input_tokens"] += int(usage.get("prompt_tokens") or 0)
        stage["output_tokens"] += int(usage.get("completion_tokens") or 0)
    for stage in by_stage.values():
        stage["cost"] = prices.cost(stage["input_tokens"], stage["output_tokens"])
    spent_in = sum(s["input_tokens"] for s in by_stage.values())
    spent_out = sum(s["output_tokens"] for s in by_stage.values())
    return {
        "input_tokens": spent_in,
        "output_tokens": spent_out,
        "total_tokens": spent_in + spent_out,
        "cost": prices.cost(spent_in, spent_out),
        "by_stage": by_stage,
    }


def describe(usage: Mapping[str, Any]) -> str:
    """For a summary line: "1,234 tokens (1,000 in, 234 out), cost 0.0012"."""
    line = f"{usage['total_tokens']:,} tokens ({usage['input_tokens']:,} in, {usage['output_tokens']:,} out)"
    return line + (f", cost {usage['cost']:.6g}" if usage.get("cost") is not None else "")
