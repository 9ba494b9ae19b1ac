"""What a request spent on the controller LLM: tokens by stage and, where the operator set prices
(per million input and output tokens), their cost: one Usage, summed from the run's LLM calls."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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


@dataclass(frozen=True, kw_only=True)
class Usage:
    """The tokens a run's LLM calls took, as the servers reported them, and their cost at the
    operator's prices (None when none are set), in all and by stage. Done carries it; the trace,
    the CLI, the API's `usage` field, the spans and the metrics read it from there."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    by_stage: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def summed(cls, calls: Iterable[Any], prices: Prices = NO_PRICES) -> Usage:
        """`calls`: a run's LLM calls (llm.LLMCall: `stage`, and `usage` with `prompt_tokens` and
        `completion_tokens`, either of which a server may leave out)."""
        by_stage: dict[str, dict[str, Any]] = {}
        for call in calls:
            stage = by_stage.setdefault(str(call.stage), {"input_tokens": 0, "output_tokens": 0})
            stage["input_tokens"] += int(call.usage.prompt_tokens or 0)
            stage["output_tokens"] += int(call.usage.completion_tokens or 0)
        for stage in by_stage.values():
            stage["cost"] = prices.cost(stage["input_tokens"], stage["output_tokens"])
        spent_in = sum(s["input_tokens"] for s in by_stage.values())
        spent_out = sum(s["output_tokens"] for s in by_stage.values())
        return cls(
            prompt_tokens=spent_in,
            completion_tokens=spent_out,
            cost=prices.cost(spent_in, spent_out),
            by_stage=by_stage,
        )

    def to_json(self) -> dict[str, Any]:
        """The shape of the trace's `usage` and of --json's."""
        return {
            "input_tokens": self.prompt_tokens,
            "output_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "cost": self.cost,
            "by_stage": {k: dict(v) for k, v in self.by_stage.items()},
        }


def describe(usage: Mapping[str, Any]) -> str:
    """For a summary line: "1,234 tokens (1,000 in, 234 out), cost 0.0012"."""
    line = f"{usage['total_tokens']:,} tokens ({usage['input_tokens']:,} in, {usage['output_tokens']:,} out)"
    return line + (f", cost {usage['cost']:.6g}" if usage.get("cost") is not None else "")
