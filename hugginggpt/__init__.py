"""HuggingGPT: an LLM plans a request as a DAG of typed tasks, picks Hugging Face models for them,
runs them, and answers from their results.

    from hugginggpt import Workspace, build_pipeline, load_settings
    pipeline = build_pipeline(load_settings())
    for event in pipeline.run("caption this photo", workspace=Workspace(Path("conv")), files=[photo]):
        ...  # StageStarted, PlanReady, ModelSelected, TaskFinished, AnswerDelta, ..., Done

Where things live: stages/ (plan, select, execute, respond), run/ (a request's run, its one task
graph, events, trace, cache, journal and resume), llms/ (the controller LLM), catalog/ and endpoints/
(the experts and where they run), costs/ (estimates and limits), files/ (workspace, outputs, URLs),
observability/ (metrics, traces, usage), commands/ (the command line), eval/. Never imports gradio;
reaches models_local only through endpoints.local.
"""

from hugginggpt.config import Settings, load_settings
from hugginggpt.factory import build_pipeline
from hugginggpt.files.workspace import Workspace
from hugginggpt.run.events import (
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
from hugginggpt.run.pipeline import Pipeline
from hugginggpt.run.records import TaskRecord, TaskStatus
from hugginggpt.version import __version__

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
