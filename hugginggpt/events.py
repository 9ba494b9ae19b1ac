"""Typed events that the pipeline yields while it works.

The pipeline never knows who listens: the Gradio app, the CLI and tests turn the same events into
chat messages, terminal lines or JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .artifacts import Artifact
from .plan import Plan


@dataclass(frozen=True)
class StageStarted:
    stage: str  # plan | select | execute | respond


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
    substituted: bool = False  # the LLM named a model that was not a candidate


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
    answer: str
    error: str | None
    trace: dict[str, Any] = field(default_factory=dict)


Event = (
    StageStarted
    | PlanRejected
    | PlanReady
    | ModelSelected
    | TaskStarted
    | TaskFinished
    | TaskFailed
    | TaskSkipped
    | AnswerDelta
    | Done
)
