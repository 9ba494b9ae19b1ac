"""HuggingGPT: an LLM plans a request as a DAG of typed tasks, picks Hugging Face models for them,
runs them, and answers from their results.

    from hugginggpt import Workspace, build_pipeline, load_settings
    pipeline = build_pipeline(load_settings())
    for event in pipeline.run("caption this photo", workspace=Workspace(Path("conv")), files=[photo]):
        ...  # StageStarted, PlanReady, ModelSelected, TaskFinished, AnswerDelta, ..., Done
"""

from .config import Settings, load_settings
from .events import (
    AnswerDelta,
    Done,
    ErrorKind,
    Estimated,
    Event,
    ModelSelected,
    Outcome,
    PickSource,
    PlanReady,
    PlanRejected,
    Stage,
    StageStarted,
    TaskDropped,
    TaskFailed,
    TaskFinished,
    TaskPlanned,
    TaskSkipped,
    TaskStarted,
)
from .factory import build_pipeline
from .pipeline import Pipeline
from .records import TaskRecord, TaskStatus
from .version import __version__
from .workspace import Workspace

__all__ = [
    "AnswerDelta",
    "Done",
    "ErrorKind",
    "Estimated",
    "Event",
    "ModelSelected",
    "Outcome",
    "PickSource",
    "Pipeline",
    "PlanReady",
    "PlanRejected",
    "Settings",
    "Stage",
    "StageStarted",
    "TaskDropped",
    "TaskFailed",
    "TaskFinished",
    "TaskPlanned",
    "TaskRecord",
    "TaskSkipped",
    "TaskStarted",
    "TaskStatus",
    "Workspace",
    "__version__",
    "build_pipeline",
    "load_settings",
]
