"""Stage 3, one task: its inputs made concrete, its models tried in turn, its outputs checked.

The task graph (task_graph.py) decides when a task starts and runs `run_task` in a worker of its
pool; a worker posts its events and, last, Finished. A task that fails for good is the graph's to
report to its dependants.
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hugginggpt import tasks as task_types
from hugginggpt.endpoints import Call, Credentials, Endpoint, EndpointError, Result
from hugginggpt.files.artifacts import Artifact, ArtifactKind
from hugginggpt.files.workspace import FileRefused, Workspace
from hugginggpt.run.events import Event, TaskFailed, TaskFinished, TaskStarted
from hugginggpt.run.records import TaskRecord, TaskStatus
from hugginggpt.run.task_progress import ProgressEvents
from hugginggpt.stages.plan import RESOURCE_REF, Task
from hugginggpt.stages.selection import Choice


@dataclass(frozen=True)
class ExecutionSettings:
    max_workers: int = 4
    task_timeout: float = 300.0
    task_attempts: int = 2
    fetch_url: Callable[[str, Path], Path] | None = None  # None: URLs are refused
    max_text_arg_chars: int = 10_000
    max_output_chars: int = 100_000


@dataclass(frozen=True)
class RunContext:
    """What every task of one run shares: where models run, where files live, and the stop signal."""

    endpoint: Endpoint
    workspace: Workspace
    run_dir: Path
    settings: ExecutionSettings = field(default_factory=ExecutionSettings)
    cancelled: threading.Event = field(default_factory=threading.Event)
    credentials: Credentials = Credentials()  # whom every call of the run is made for
    cache_scope: str | None = None  # whose cached results the run's calls share (None: not cached)


class Finished:
    """Message from a worker: its task is over (its record holds the result)."""

    def __init__(self, task_id: int):
        self.task_id = task_id


class Inbox(Protocol):
    """Where a worker posts its events and, last, Finished: a queue.Queue."""

    def put(self, item: Event | Finished) -> None: ...


def run_task(
    task: Task,
    choice: Choice,
    records: dict[int, TaskRecord],
    ctx: RunContext,
    inbox: Inbox,
) -> None:
    """In a worker thread: the task's models in turn until one succeeds; ends with Finished."""
    record = records[task.id]
    started = time.perf_counter()

    def fail(error: str, model: str = "") -> None:
        record.status, record.error = TaskStatus.FAILED, error
        inbox.put(TaskFailed(task.id, task.task, model, error, final=True))

    def stop() -> None:  # stopped on purpose: not a model's failure, so no event and no fallback
        record.status, record.error = TaskStatus.STOPPED, "stopped before it finished"

    try:
        if ctx.cancelled.is_set():
            return stop()
        try:
            inputs = resolve_inputs(task, records, ctx.workspace, ctx.run_dir, ctx.settings)
        except (FileRefused, ValueError) as e:
            return fail(str(e))
        if choice.seed is not None:  # an input like any other: the result cache keys on it too
            inputs["seed"] = record.seed = choice.seed
        models = choice.fallbacks()[: ctx.settings.task_attempts]
        if not models:
            return fail(choice.reason)
        out_dir = ctx.run_dir / f"task-{task.id}"
        for attempt, model in enumerate(models, start=1):
            if ctx.cancelled.is_set():
                return stop()
            record.model = model.id
            inbox.put(TaskStarted(task.id, task.task, model.id, attempt))
            t0 = time.perf_counter()
            try:
                report = ProgressEvents(task.id, task.task, model.id, inbox.put)
                try:
                    result = _call_with_timeout(ctx, task.task, model, inputs, out_dir, report)
                finally:
                    report.close()
                outputs = _check_outputs(
                    task.task, result.outputs, ctx.workspace, ctx.settings.max_output_chars
                )
            except EndpointError as e:
                if ctx.cancelled.is_set():
                    return stop()
                error, seconds = str(e), time.perf_counter() - t0
                final = attempt == len(models)
                record.attempts.append({"model": model.id, "error": error, "seconds": round(seconds, 3)})
                inbox.put(TaskFailed(task.id, task.task, model.id, error, final=final, seconds=seconds))
                if final:
                    record.status, record.error = TaskStatus.FAILED, error
                continue
            seconds = time.perf_counter() - t0
            record.attempts.append({"model": model.id, "error": None, "seconds": round(seconds, 3)})
            record.cached = result.cached
            record.status, record.outputs = TaskStatus.DONE, outputs
            inbox.put(
                TaskFinished(
                    task.id, task.task, model.id, record.outputs, seconds, record.cached, record.seed
                )
            )
            return
    except Exception as e:  # a bug must not leave the scheduler waiting forever
        fail(f"internal error: {type(e).__name__}: {e}", record.model or "")
    finally:
        record.seconds = time.perf_counter() - started
        inbox.put(Finished(task.id))


class _AnyOf:
    """A stop signal set when any of its events is: the request's cancel, or this call's time-out."""

    def __init__(self, *events: threading.Event) -> None:
        self.events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


def _call_with_timeout(
    ctx: RunContext,
    task: str,
    model: Any,
    inputs: dict[str, Any],
    out_dir: Path,
    report: ProgressEvents | None = None,
) -> Result:
    """Run the endpoint in its own thread so that a hung model costs at most `timeout` seconds.

    Python cannot kill a thread: a timed-out call is told to stop (local diffusion and generation end
    within a step or a token) and otherwise finishes in the background, its result dropped.
    """
    result: dict[str, Any] = {}
    timed_out = threading.Event()
    timeout = ctx.settings.task_timeout
    deadline = time.monotonic() + timeout  # what an endpoint may wait for an answer (Call.seconds_left)

    def call() -> None:
        try:
            call = Call(
                out_dir=out_dir,
                stop=_AnyOf(ctx.cancelled, timed_out),
                progress=report,
                deadline=deadline,
                credentials=ctx.credentials,
                cache_scope=ctx.cache_scope,
            )
            result["result"] = ctx.endpoint.run(task, model, inputs, call)
        except EndpointError as e:
            result["error"] = e
        except Exception as e:  # any other failure of a model is that model's failure
            result["error"] = EndpointError(f"{type(e).__name__}: {e}")

    worker = threading.Thread(
        target=contextvars.copy_context().run, args=(call,), daemon=True, name=f"model-{task}"
    )
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        timed_out.set()
        raise EndpointError(f"timed out after {timeout:g} s")
    if "error" in result:
        raise result["error"]
    return result["result"]


def _check_outputs(
    task: str, outputs: list[Artifact], workspace: Workspace, max_chars: int
) -> list[Artifact]:
    """The outputs, checked: every kind the task promises, files inside the workspace (a link
    leading out is refused, as a path naming another place is), text and data cut to `max_chars`."""
    spec = task_types.get(task)
    missing = [k for k in (spec.outputs if spec else ()) if not any(a.kind == k for a in outputs)]
    if missing:
        raise EndpointError(f"the model returned no {' or '.join(missing)} output")
    for a in outputs:
        if a.path is not None and not (workspace.contains(a.path) and Path(a.path).is_file()):
            raise EndpointError(f"the model's output file {a.path} is missing or outside the workspace")
    return [_bounded(a, max_chars) for a in outputs]


def _bounded(artifact: Artifact, max_chars: int) -> Artifact:
    if artifact.path is not None:
        return artifact
    if isinstance(artifact.value, str):
        text = artifact.value
    else:
        try:
            text = json.dumps(artifact.value, default=str)
        except (TypeError, ValueError, RecursionError):
            text = ""
    if len(text) <= max_chars:
        return artifact
    cut = f"{text[:max_chars]}[... {len(text) - max_chars:,} characters of the model's output cut]"
    return Artifact(ArtifactKind.TEXT if isinstance(artifact.value, str) else artifact.kind, value=cut)


def resolve_inputs(
    task: Task,
    records: dict[int, TaskRecord],
    workspace: Workspace,
    run_dir: Path,
    settings: ExecutionSettings,
) -> dict[str, Any]:
    """Argument values made concrete: text with references filled in, media as workspace paths.

    ValueError for a text longer than the budget, FileRefused for a file that is not this
    conversation's."""
    fetch_url = settings.fetch_url
    spec = task_types.get(task.task)
    inputs: dict[str, Any] = {}
    references = task.references()
    for name, value in task.args.items():
        arg = spec.arg(name) if spec else None
        kind = arg.kind if arg else "text"
        refs = references.get(name, [])
        if kind == ArtifactKind.TEXT:
            # One pass: "<resource>-1" must not eat the start of "<resource>-10", nor a filled-in
            # output that happens to contain a reference be filled in again.
            text = RESOURCE_REF.sub(lambda m: _as_text(records[int(m.group(1))]), value)
            if len(text) > settings.max_text_arg_chars:
                raise ValueError(
                    f"argument '{name}' is {len(text):,} characters long; "
                    f"at most {settings.max_text_arg_chars:,} go to a model"
                )
            inputs[name] = text
        elif refs:
            artifact = records[refs[0]].output(kind)
            if artifact is None or artifact.path is None:
                raise ValueError(f"argument '{name}': task {refs[0]} produced no {kind}")
            inputs[name] = artifact.path
        elif value.lower().startswith(("http://", "https://")):
            if fetch_url is None:
                raise FileRefused(f"argument '{name}': fetching URLs is turned off")
            inputs[name] = fetch_url(value, run_dir / "downloads")
        else:
            inputs[name] = workspace.resolve(value)
    return inputs


def _as_text(record: TaskRecord) -> str:
    text = record.output(ArtifactKind.TEXT)
    if text is not None:
        return str(text.value)
    data = record.output(ArtifactKind.DATA)
    return json.dumps(data.value) if data is not None else ""
