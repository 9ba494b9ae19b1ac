"""Typed events that the pipeline yields while it works, ending with Done.

The pipeline never knows who listens: the Gradio app, the CLI, the APIs and tests turn the same
events into chat messages, terminal lines or JSON. Every value with a fixed set of meanings is an
enum (a str subclass, so it serialises as its name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .artifacts import Artifact
from .plan import Plan
from .records import TaskRecord

if TYPE_CHECKING:  # selection imports this module
    from .estimate import Estimate
    from .limits import Excluded
    from .selection import Choice


class Stage(StrEnum):
    PLAN = "plan"
    SELECT = "select"
    EXECUTE = "execute"
    RESPOND = "respond"


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


class Outcome(StrEnum):
    ANSWERED = "answered"
    PLANNED = "planned"  # stopped after planning and selection, as asked (review, --plan-only)
    EXECUTED = "executed"  # ran the tasks and wrote no answer, as asked (replay --no-answer)
    FAILED = "failed"
    CANCELLED = "cancelled"  # stopped by the user or by the page going away


class ErrorKind(StrEnum):
    LLM = "llm"  # the controller LLM failed: unreachable, refused the key, rate limited, ...
    PLAN = "plan"  # no valid plan after the corrections
    INPUT = "input"  # the request or its files were refused
    LIMIT = "limit"  # the request ran past one of its budgets (time)
    INTERNAL = "internal"  # a bug: the server log has the details


@dataclass(frozen=True)
class StageStarted:
    stage: Stage


@dataclass(frozen=True)
class PlanRejected:
    """The LLM's plan had problems; they were sent back for a corrected plan."""

    attempt: int
    problems: list[str]


@dataclass(frozen=True)
class PlanReady:
    plan: Plan
    attempts: int  # 1 when the first plan was valid


@dataclass(frozen=True)
class ModelSelected:
    task_id: int
    task: str
    model: str
    reason: str
    candidates: list[str]
    source: PickSource = PickSource.LLM


@dataclass(frozen=True)
class Estimated:
    """What a task's chosen model will take (estimate.py), and the candidates the user's limits
    left out; after selection, before anything runs."""

    task_id: int
    task: str
    model: str
    estimate: Estimate
    excluded: tuple[Excluded, ...] = ()


@dataclass(frozen=True)
class TaskStarted:
    task_id: int
    task: str
    model: str
    attempt: int = 1


@dataclass(frozen=True)
class TaskFinished:
    task_id: int
    task: str
    model: str
    outputs: list[Artifact]
    seconds: float
    cached: bool = False  # served from the result cache: no model ran
    seed: int | None = None


@dataclass(frozen=True)
class TaskFailed:
    """A model failed on a task. `final` is False when another candidate will be tried."""

    task_id: int
    task: str
    model: str
    error: str
    final: bool
    seconds: float = 0.0


@dataclass(frozen=True)
class TaskSkipped:
    task_id: int
    task: str
    reason: str


@dataclass(frozen=True)
class AnswerDelta:
    text: str


@dataclass(frozen=True)
class Done:
    """The end of a run. `error` (in the user's words) and `error_kind` are set when it failed."""

    outcome: Outcome
    answer: str = ""
    error: str | None = None
    error_kind: ErrorKind | None = None
    records: tuple[TaskRecord, ...] = ()
    trace: dict[str, Any] = field(default_factory=dict)
    trace_file: Path | None = None
    incomplete: str | None = None  # why the answer stops short (the LLM's stream broke off, a limit)
    plan: Plan | None = None  # the plan that ran (or would run), once there is one
    choices: Mapping[int, Choice] = field(default_factory=dict)  # its models and seeds, by task id

    def __post_init__(self) -> None:
        if (self.outcome is Outcome.FAILED) != (self.error is not None and self.error_kind is not None):
            raise ValueError("a failed run has an error and its kind; no other run has either")

    @property
    def ok(self) -> bool:
        return self.outcome is not Outcome.FAILED and self.outcome is not Outcome.CANCELLED

    @property
    def llm_calls(self) -> int:
        return len(self.trace.get("llm_calls", []))


Event = (
    StageStarted
    | PlanRejected
    | PlanReady
    | ModelSelected
    | Estimated
    | TaskStarted
    | TaskFinished
    | TaskFailed
    | TaskSkipped
    | AnswerDelta
    | Done
)
