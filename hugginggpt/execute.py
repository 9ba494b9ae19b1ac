"""Stage 3: run the plan's tasks as a DAG on a bounded pool, streaming events as they happen.

A task starts the moment its last dependency finishes (no polling). Each task tries its chosen
model, then the next candidates; a task that fails for good skips its dependants, with the reason.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import tasks as task_types
from .artifacts import Artifact
from .endpoints import Endpoint, EndpointError
from .events import Event, TaskFailed, TaskFinished, TaskSkipped, TaskStarted
from .plan import RESOURCE_REF, Plan, Task
from .select import Choice
from .workspace import FileRefused, Workspace


@dataclass
class TaskRecord:
    """What happened to one task, for the answer, the trace and the CLI's JSON."""

    id: int
    task: str
    args: dict[str, str]
    model: str | None = None
    status: str = "pending"  # pending | done | failed | skipped
    error: str | None = None
    outputs: list[Artifact] = field(default_factory=list)
    seconds: float = 0.0
    attempts: list[dict[str, Any]] = field(default_factory=list)

    def output(self, kind: str) -> Artifact | None:
        return next((a for a in self.outputs if a.kind == kind), None)

    def to_json(self, root: Path | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task,
            "args": self.args,
            "model": self.model,
            "status": self.status,
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "attempts": self.attempts,
            "outputs": [a.to_json(root) for a in self.outputs],
        }


@dataclass
class ExecutionSettings:
    max_workers: int = 4
    task_timeout: float = 300.0
    task_attempts: int = 2
    fetch_url: Callable[[str, Path], Path] | None = None  # None: URLs are refused


class _Finished:
    """Internal message from a worker: its task is over (records hold the result)."""

    def __init__(self, task_id: int):
        self.task_id = task_id


def execute_plan(
    plan: Plan,
    choices: dict[int, Choice],
    endpoint: Endpoint,
    workspace: Workspace,
    run_dir: Path,
    records: dict[int, TaskRecord],
    settings: ExecutionSettings | None = None,
    cancelled: threading.Event | None = None,
) -> Iterator[Event]:
    """Run every task; yield events; fill `records` (one per task) as tasks end."""
    settings = settings or ExecutionSettings()
    cancelled = cancelled or threading.Event()
    by_id = plan.by_id()
    for t in plan.tasks:
        records[t.id] = TaskRecord(t.id, t.task, dict(t.args))
    waiting_on = {t.id: set(t.dep) for t in plan.tasks}
    dependants: dict[int, list[int]] = {t.id: [] for t in plan.tasks}
    for t in plan.tasks:
        for d in t.dep:
            dependants[d].append(t.id)

    inbox: queue.Queue[Event | _Finished] = queue.Queue()
    running = 0
    pool = ThreadPoolExecutor(max_workers=settings.max_workers, thread_name_prefix="task")

    def start(task_id: int) -> None:
        nonlocal running
        running += 1
        pool.submit(
            _run_task,
            by_id[task_id],
            choices[task_id],
            endpoint,
            workspace,
            run_dir,
            records,
            settings,
            inbox,
            cancelled,
        )

    def skip_dependants(task_id: int, reason: str) -> Iterator[Event]:
        for child in dependants[task_id]:
            record = records[child]
            if record.status == "pending":
                record.status, record.error = "skipped", reason
                yield TaskSkipped(child, record.task, reason)
                yield from skip_dependants(child, f"it needs task {child}, which was skipped")

    finished = False
    try:
        for t in plan.tasks:
            if not waiting_on[t.id]:
                start(t.id)
        while running:
            message = inbox.get()
            if not isinstance(message, _Finished):
                yield message
                continue
            running -= 1
            done = records[message.task_id]
            if done.status != "done":
                yield from skip_dependants(done.id, f"it needs task {done.id} ({done.task}), which failed")
                continue
            for child in dependants[done.id]:
                waiting_on[child].discard(done.id)
                if not waiting_on[child] and records[child].status == "pending":
                    start(child)
        finished = True
    finally:
        if not finished:
            cancelled.set()  # a consumer that stops listening cancels what has not started
        pool.shutdown(wait=False, cancel_futures=True)


def _run_task(
    task: Task,
    choice: Choice,
    endpoint: Endpoint,
    workspace: Workspace,
    run_dir: Path,
    records: dict[int, TaskRecord],
    settings: ExecutionSettings,
    inbox: queue.Queue,
    cancelled: threading.Event,
) -> None:
    record = records[task.id]
    started = time.perf_counter()

    def fail(error: str, model: str = "") -> None:
        record.status, record.error = "failed", error
        inbox.put(TaskFailed(task.id, task.task, model, error, final=True))

    def cancel() -> None:  # stopped on purpose: not a model's failure, so no event and no fallback
        record.status, record.error = "failed", "cancelled"

    try:
        if cancelled.is_set():
            return cancel()
        try:
            inputs = resolve_inputs(task, records, workspace, run_dir, settings.fetch_url)
        except (FileRefused, ValueError) as e:
            return fail(str(e))
        models = choice.fallbacks()[: settings.task_attempts]
        if not models:
            return fail(choice.reason)
        out_dir = run_dir / f"task-{task.id}"
        for attempt, model in enumerate(models, start=1):
            if cancelled.is_set():
                return cancel()
            record.model = model.id
            inbox.put(TaskStarted(task.id, task.task, model.id, attempt))
            t0 = time.perf_counter()
            try:
                outputs = _call_with_timeout(
                    endpoint, task.task, model, inputs, out_dir, settings.task_timeout, cancelled
                )
                _check_outputs(task.task, outputs, workspace)
            except EndpointError as e:
                if cancelled.is_set():
                    return cancel()
                error, seconds = str(e), time.perf_counter() - t0
                final = attempt == len(models)
                record.attempts.append({"model": model.id, "error": error, "seconds": round(seconds, 3)})
                inbox.put(TaskFailed(task.id, task.task, model.id, error, final=final, seconds=seconds))
                if final:
                    record.status, record.error = "failed", error
                continue
            seconds = time.perf_counter() - t0
            record.attempts.append({"model": model.id, "error": None, "seconds": round(seconds, 3)})
            record.status, record.outputs = "done", outputs
            inbox.put(TaskFinished(task.id, task.task, model.id, outputs, seconds))
            return
    except Exception as e:  # a bug must not leave the scheduler waiting forever
        fail(f"internal error: {type(e).__name__}: {e}", record.model or "")
    finally:
        record.seconds = time.perf_counter() - started
        inbox.put(_Finished(task.id))


class _AnyOf:
    """A stop signal set when any of its events is: the request's cancel, or this call's time-out."""

    def __init__(self, *events: threading.Event) -> None:
        self.events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self.events)


def _call_with_timeout(
    endpoint: Endpoint,
    task: str,
    model: Any,
    inputs: dict[str, Any],
    out_dir: Path,
    timeout: float,
    cancelled: threading.Event,
) -> list[Artifact]:
    """Run the endpoint in its own thread so that a hung model costs at most `timeout` seconds.

    Python cannot kill a thread: a timed-out call is told to stop (local diffusion and generation end
    within a step or a token) and otherwise finishes in the background, its result dropped.
    """
    result: dict[str, Any] = {}
    timed_out = threading.Event()

    def call() -> None:
        try:
            result["outputs"] = endpoint.run(task, model, inputs, out_dir, stop=_AnyOf(cancelled, timed_out))
        except EndpointError as e:
            result["error"] = e
        except Exception as e:  # any other failure of a model is that model's failure
            result["error"] = EndpointError(f"{type(e).__name__}: {e}")

    worker = threading.Thread(target=call, daemon=True, name=f"model-{task}")
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        timed_out.set()
        raise EndpointError(f"timed out after {timeout:g} s")
    if "error" in result:
        raise result["error"]
    return result["outputs"]


def _check_outputs(task: str, outputs: list[Artifact], workspace: Workspace) -> None:
    spec = task_types.get(task)
    missing = [k for k in (spec.outputs if spec else ()) if not any(a.kind == k for a in outputs)]
    if missing:
        raise EndpointError(f"the model returned no {' or '.join(missing)} output")
    for a in outputs:
        if a.path is not None and not (workspace.contains(a.path) and Path(a.path).is_file()):
            raise EndpointError(f"the model's output file {a.path} is missing or outside the workspace")


def resolve_inputs(
    task: Task,
    records: dict[int, TaskRecord],
    workspace: Workspace,
    run_dir: Path,
    fetch_url: Callable[[str, Path], Path] | None,
) -> dict[str, Any]:
    """Argument values made concrete: text with references filled in, media as workspace paths."""
    spec = task_types.get(task.task)
    inputs: dict[str, Any] = {}
    references = task.references()
    for name, value in task.args.items():
        arg = spec.arg(name) if spec else None
        kind = arg.kind if arg else "text"
        refs = references.get(name, [])
        if kind == "text":
            # One pass: "<resource>-1" must not eat the start of "<resource>-10", nor a filled-in
            # output that happens to contain a reference be filled in again.
            inputs[name] = RESOURCE_REF.sub(lambda m: _as_text(records[int(m.group(1))]), value)
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
    text = record.output("text")
    if text is not None:
        return str(text.value)
    data = record.output("data")
    return json.dumps(data.value) if data is not None else ""
