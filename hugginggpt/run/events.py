"""Typed events that the pipeline yields while it works, ending with Done.

The pipeline never knows who listens: the Gradio app, the CLI, the APIs and tests turn the same
events into chat messages, terminal lines or JSON. Every value with a fixed set of meanings is an
enum (a str subclass, so it serialises as its name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from hugginggpt.files.artifacts import Artifact
from hugginggpt.observability.usage import Usage
from hugginggpt.run.records import TaskRecord
from hugginggpt.stages.choice import Choice, Estimate, Excluded, PickSource
from hugginggpt.stages.plan import Plan, Task


class Stage(StrEnum):
    PLAN = "plan"
    SELECT = "select"
    EXECUTE = "execute"
    RESPOND = "respond"


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
class TaskPlanned:
    """A task of the plan the LLM is still writing is complete (streaming execution): it may start
    before PlanReady, which still carries the plan that counts."""

    task: Task


@dataclass(frozen=True)
class TaskDropped:
    """A task started from the plan as it streamed is not in the plan that counts (the LLM's plan
    was rejected and corrected): it was stopped, and its work is not the answer's."""

    task_id: int
    task: str
    reason: str


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


class Phase(StrEnum):
    DOWNLOAD = "download"  # the model's files come from the Hub
    LOAD = "load"  # its weights are being loaded
    RUN = "run"  # a tool reports its progress (MCP progress notifications): steps, not bytes


@dataclass(frozen=True)
class TaskProgress:
    """A task's model is being downloaded or loaded (local runs only), a few times a second at most.
    The byte counts, speed and time left are for the download; None where not known."""

    task_id: int
    task: str
    model: str
    phase: Phase
    done_bytes: int = 0
    total_bytes: int | None = None
    bytes_per_second: float | None = None
    seconds_left: float | None = None


@dataclass(frozen=True)
class TaskFinished:
    task_id: int
    task: str
    model: str
    outputs: list[Artifact]
    seconds: float
    cached: bool = False  # served from the result cache: no model ran
    seed: int | None = None
    resumed: bool = False  # finished before the run crashed: taken from its journal (resume.py)


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
    """The end of a run. `error` (in the user's words) and `error_kind` are set when it failed.
    Every field but the outcome is given by name."""

    outcome: Outcome
    _: KW_ONLY
    answer: str = ""
    error: str | None = None
    error_kind: ErrorKind | None = None
    records: tuple[TaskRecord, ...] = ()
    trace: dict[str, Any] = field(default_factory=dict)
    trace_file: Path | None = None
    incomplete: str | None = None  # why the answer stops short (the LLM's stream broke off, a limit)
    plan: Plan | None = None  # the plan that ran (or would run), once there is one
    choices: Mapping[int, Choice] = field(default_factory=dict)  # its models and seeds, by task id
    request_id: str = ""  # names its trace file and its outputs' folder
    request: str = ""
    usage: Usage = field(default_factory=Usage)
    timings: Mapping[str, float] = field(default_factory=dict)  # seconds per stage, and "total"
    # each model that ran: its estimate beside what it took (hugginggpt.costs.estimate.side_by_side)
    estimates: tuple[Mapping[str, Any], ...] = ()

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
    | TaskPlanned
    | TaskDropped
    | ModelSelected
    | Estimated
    | TaskStarted
    | TaskProgress
    | TaskFinished
    | TaskFailed
    | TaskSkipped
    | AnswerDelta
    | Done
)
