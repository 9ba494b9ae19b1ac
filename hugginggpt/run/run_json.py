"""A finished run as JSON, one shape for every reader: the CLI's --json, the OpenAI-compatible API's
`hugginggpt` field and the MCP tools. Only how a file output is named differs: a path on this
machine for the CLI, a URL for a client of the doors (`output`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hugginggpt.files.artifacts import Artifact
from hugginggpt.run.events import Done
from hugginggpt.run.records import TaskRecord

OutputJSON = Callable[[Artifact], dict[str, Any]]


def local_output(artifact: Artifact) -> dict[str, Any]:
    """An output as the CLI shows it: a file by its absolute path, a value as it is."""
    if artifact.path is not None:
        return {"kind": str(artifact.kind), "path": str(Path(artifact.path).resolve())}
    return {"kind": str(artifact.kind), "value": artifact.value}


def run_json(done: Done, output: OutputJSON = local_output) -> dict[str, Any]:
    """{request_id, answer, error, outcome, error_kind, answer_incomplete, llm_calls, tasks, usage,
    crashes}:
    usage is tokens by stage and their cost at the operator's prices (hugginggpt.observability.usage)."""
    return {
        "request_id": done.request_id or None,
        "answer": done.answer,
        "error": done.error,
        "outcome": str(done.outcome),
        "error_kind": done.error_kind and str(done.error_kind),
        "answer_incomplete": done.incomplete,
        "llm_calls": done.llm_calls,
        "tasks": [task_json(r, output) for r in done.records],
        "usage": done.usage.to_json(),
        "crashes": int(done.trace.get("crashes") or 0),  # a resumed run's (hugginggpt.run.resume)
    }


def task_json(record: TaskRecord, output: OutputJSON = local_output) -> dict[str, Any]:
    """{id, task, model, status, error, cached, seed, resumed, outputs}; resumed: finished before a
    crash, taken from the run's journal."""
    return {
        "id": record.id,
        "task": record.task,
        "model": record.model,
        "status": str(record.status),
        "error": record.error,
        "cached": record.cached,
        "seed": record.seed,
        "resumed": record.resumed,
        "outputs": [output(a) for a in record.outputs],
    }
