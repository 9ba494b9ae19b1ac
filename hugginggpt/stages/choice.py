"""A task's model choice and how it was made: what selection returns, a run's events and its Done
carry, and a person may give (a plan file, an edit, a replayed trace)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from hugginggpt.catalog import ModelCard


class PickSource(StrEnum):
    """How a task's model was chosen."""

    LLM = "llm"  # the LLM picked it among the candidates
    ONLY_CANDIDATE = "only_candidate"  # there was no choice to make
    NOT_A_CANDIDATE = "not_a_candidate"  # the LLM named no candidate: the top-ranked one is used
    SELECTION_FAILED = "selection_failed"  # the selection call failed: the top-ranked one is used
    NO_CANDIDATE = "no_candidate"  # no model in the catalog can run the task here
    GIVEN = "given"  # named by the user: a plan file, an edit, a replayed trace
    LIMIT = "limit"  # the pick would break the user's limits (limits.py): a smaller candidate is used

    @property
    def replaced(self) -> bool:
        """The LLM was asked but its pick is not what runs."""
        return self in (PickSource.NOT_A_CANDIDATE, PickSource.SELECTION_FAILED, PickSource.LIMIT)


@dataclass(frozen=True)
class Excluded:
    """A candidate left out: which limit it breaks (`limit`) and what it would need (`needs`)."""

    id: str
    why: str
    limit: str  # "model_size", "download", "license", "unknown"
    needs: float | str | None = None  # its size or download in bytes, or its licence

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "why": self.why}


@dataclass(frozen=True)
class Choice:
    task_id: int
    task: str
    model: ModelCard | None  # None: no model can run this task
    reason: str
    candidates: tuple[ModelCard, ...] = ()
    source: PickSource = PickSource.LLM
    seed: int | None = None  # for tasks whose model samples (seeds.py); None: the model's own randomness
    estimate: Estimate | None = None  # what the model will take (limits.Screen adds it)
    excluded: tuple[Excluded, ...] = ()  # candidates the user's limits left out, with why

    def fallbacks(self) -> list[ModelCard]:
        """The chosen model first, then the other candidates in rank order."""
        if self.model is None:
            return []
        return [self.model, *(c for c in self.candidates if c.id != self.model.id)]

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model.id if self.model else None,
            "reason": self.reason,
            "candidates": [m.id for m in self.candidates],
            "source": str(self.source),
            "substituted": self.source.replaced,
            "seed": self.seed,
            "estimate": self.estimate.to_json() if self.estimate else None,
            "excluded": [e.to_json() for e in self.excluded],
        }


@dataclass(frozen=True)
class Estimate:
    where: str  # "local:cpu", "local:cpu loaded", "hosted": what its seconds are learnt for
    download_bytes: int | None
    memory_bytes: int | None
    seconds: float | None
    cost_usd: float | None
    runs: int = 0  # past runs the seconds come from; 0: the prior

    def to_json(self) -> dict[str, Any]:
        return {
            "download_bytes": self.download_bytes,
            "memory_bytes": self.memory_bytes,
            "seconds": None if self.seconds is None else round(self.seconds, 3),
            "cost_usd": self.cost_usd,
            "where": self.where,
            "runs": self.runs,
        }

    def line(self) -> str:
        """For people: "download 0 B, memory 12 MB, about 0.4 s (3 runs here), cost n/a"."""
        seconds = "? s" if self.seconds is None else f"about {self.seconds:.3g} s"
        learnt = f" ({self.runs} run{'s' * (self.runs != 1)} here)" if self.runs else " (a guess)"
        cost = "n/a" if self.cost_usd is None else f"${self.cost_usd:.4g}"
        return (
            f"download {size_text(self.download_bytes)}, memory {size_text(self.memory_bytes)}, "
            f"{seconds}{learnt if self.seconds is not None else ''}, cost {cost} ({self.where})"
        )

    def short(self) -> str:
        """In a few words, for a plan's list and diagram: "0.4 s / 12 MB in memory / 1 GB to download"."""
        parts = ["? s" if self.seconds is None else f"{self.seconds:.2g} s"]
        if self.memory_bytes:
            parts.append(f"{size_text(self.memory_bytes)} in memory")
        if self.download_bytes != 0:
            parts.append(f"{size_text(self.download_bytes)} to download")
        if self.cost_usd is not None:
            parts.append(f"{self.cost_usd:.4g} USD")
        return " / ".join(parts)


def size_text(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"
