"""A task's model choice and how it was made: what selection returns, a run's events and its Done
carry, and a person may give (a plan file, an edit, a replayed trace)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from .catalog import ModelCard

if TYPE_CHECKING:  # estimate.py imports selection, which imports this module
    from .estimate import Estimate


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
