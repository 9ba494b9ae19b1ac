"""The task graph: one run's tasks as a DAG that may grow while the plan streams, and the one loop
that runs it on one bounded pool.

The shape of graphlib.TopologicalSorter: tasks are added as they arrive (`add`, with their model
choice, or with none and `choose` later) and `close()` says that no task and no choice will come
any more. Each time the loop wakes (a worker's message, or a message of the caller's put in
`inbox`), the graph settles in one place what follows: every task whose dependencies are done
starts; the dependants of a task that failed or was skipped are skipped, with one wording of the
reason; the models of tasks that wait for their inputs are warmed. A graph made with `hold=True`
starts nothing before `close()` (limits that need the whole plan); it still warms. Once the run is
stopped nothing more starts, and what never started is settled as stopped.

A task already finished (a resumed run's, its record read from a journal) joins with
`add_finished(task, choice, record)`: it counts as done for its dependants and never runs again.

`execute_steps(plan, choices, ctx)` is the whole plan at once: add all, close, run.
"""

from __future__ import annotations

import contextvars
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from hugginggpt.run.events import Event, Stage, StageStarted, TaskDropped, TaskSkipped, TaskStarted
from hugginggpt.run.records import TaskRecord, TaskStatus
from hugginggpt.stages.execute import Finished, RunContext, run_task
from hugginggpt.stages.plan import Plan, Task
from hugginggpt.stages.selection import Choice

_BROKEN = (TaskStatus.FAILED, TaskStatus.SKIPPED)


class _TaskStop(threading.Event):
    """A task's stop signal: set when the task is dropped, and read as set once the run stops."""

    def __init__(self, run: threading.Event) -> None:
        super().__init__()
        self.run = run

    def is_set(self) -> bool:
        return super().is_set() or self.run.is_set()


@dataclass
class Node:
    """A task the graph knows. Its record is complete once `over` (its worker said Finished, or it
    was skipped, or it was added finished)."""

    task: Task
    serial: int  # unique: a dropped task and its replacement may share an id
    record: TaskRecord
    stop: _TaskStop
    choice: Choice | None = None
    started: bool = False
    over: bool = False
    warmed: bool = False
    times: dict[str, Any] = field(default_factory=dict)  # seconds since the graph's t0


@dataclass(frozen=True)
class _FromWorker:
    serial: int
    message: Event | Finished


class _WorkerInbox:
    """What one worker posts, tagged with its node."""

    def __init__(self, inbox: queue.Queue[Any], serial: int) -> None:
        self.inbox = inbox
        self.serial = serial

    def put(self, item: Event | Finished) -> None:
        self.inbox.put(_FromWorker(self.serial, item))


class TaskGraph:
    """The tasks of one run and the loop that runs them. After `run()`: `records(plan)`, `choices()`,
    `first_start` and `last_finish` (seconds since `t0`), and each node's `times`."""

    def __init__(self, ctx: RunContext, *, hold: bool = False, t0: float | None = None) -> None:
        self.ctx = ctx
        self.hold = hold  # nothing starts before close(); the caller may set it while it waits
        self.t0 = time.perf_counter() if t0 is None else t0
        self.inbox: queue.Queue[Any] = queue.Queue()  # workers' messages, and the caller's own
        self.nodes: dict[int, Node] = {}  # by task id: the tasks that count now
        self.every: list[Node] = []  # by serial: dropped ones too (their workers may still post)
        self.closed = False
        self.running = 0
        self.first_start: float | None = None
        self.last_finish: float | None = None
        self._dirty = True  # something changed since the last look for ready tasks
        self.pool = ThreadPoolExecutor(ctx.settings.max_workers, thread_name_prefix="task")
        self.warmer = ThreadPoolExecutor(1, thread_name_prefix="warm")  # loads are one at a time anyway

    # ---- what the caller tells the graph ----------------------------------------------------

    def add(self, task: Task, choice: Choice | None = None) -> Node:
        """A task of the plan; without a choice it waits for `choose`."""
        node = Node(
            task,
            len(self.every),
            TaskRecord(task.id, task.task, dict(task.args)),
            _TaskStop(self.ctx.cancelled),
        )
        node.times = {"id": task.id, "task": task.task, "parsed": self.now()}
        self.nodes[task.id] = node
        self.every.append(node)
        if choice is not None:
            self.choose(node, choice)
        self._dirty = True
        return node

    def add_finished(self, task: Task, choice: Choice | None, record: TaskRecord) -> Node:
        """A task that already ran (resume): `record` (status done, with its outputs) feeds its
        dependants as a finished worker's would; the task is never started."""
        node = self.add(task)
        node.choice, node.record, node.started, node.over = choice, record, True, True
        return node

    def choose(self, node: Node, choice: Choice) -> None:
        node.choice = choice
        node.times["selected"] = self.now()
        self._dirty = True

    def drop(self, node: Node, reason: str) -> TaskDropped:
        """A task the plan that counts does not hold: stopped, and its work never shown."""
        node.stop.set()
        del self.nodes[node.task.id]
        node.times["dropped"] = self.now()
        return TaskDropped(node.task.id, node.task.task, reason)

    def close(self) -> None:
        """No task and no choice will come any more: a held graph may start."""
        self.closed = True
        self._dirty = True

    # ---- the loop ---------------------------------------------------------------------------

    def run(self, handle: Callable[[Any], Iterable[Event]] | None = None) -> Generator[Event, None, None]:
        """The one loop: runs until the graph is closed and idle, or stopped and idle. Messages that
        are not the workers' go to `handle` (the streaming run's planning and selection)."""
        finished = False
        try:
            yield from self._schedule()
            while not self._over():
                message = self.inbox.get()
                if isinstance(message, _FromWorker):
                    shown = self._from_worker(message)
                    if shown is not None:
                        yield shown
                elif handle is not None:
                    yield from handle(message)
                yield from self._schedule()
            finished = True
        except GeneratorExit:  # the consumer stopped listening: the run is stopped
            self.ctx.cancelled.set()
            raise
        finally:
            if not finished:  # a failure too: nothing keeps running
                for node in self.every:
                    node.stop.set()
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.warmer.shutdown(wait=False, cancel_futures=True)
            for node in self.nodes.values():
                if node.record.status is TaskStatus.PENDING:  # stopped before it could start
                    node.record.status = TaskStatus.STOPPED

    def _over(self) -> bool:
        return not self.running and (self.closed or self.ctx.cancelled.is_set())

    def _schedule(self) -> Generator[Event, None, None]:
        """Start every task whose dependencies are done, skip those whose dependencies failed or were
        skipped, warm the models of those that wait. Repeated until nothing changes: a skip may
        settle a chain."""
        while self._dirty and not self.ctx.cancelled.is_set():
            self._dirty = False
            for node in list(self.nodes.values()):
                if node.started or node.over or node.choice is None:
                    continue
                deps = [self.nodes.get(d) for d in node.task.dep]
                over = [d for d in deps if d is not None and d.over]
                broken = next((d for d in over if d.record.status in _BROKEN), None)
                if broken is not None:
                    yield self._skip(node, broken.record)
                elif len(over) == len(deps) and not (self.hold and not self.closed):
                    yield from self._start(node)
                elif not node.warmed and node.choice.model is not None:
                    node.warmed = True
                    self.warmer.submit(self.ctx.endpoint.warm, node.task.task, node.choice.model)

    def _skip(self, node: Node, broken: TaskRecord) -> TaskSkipped:
        why = "failed" if broken.status is TaskStatus.FAILED else "was skipped"
        reason = f"it needs task {broken.id} ({broken.task}), which {why}"
        node.record.status, node.record.error = TaskStatus.SKIPPED, reason
        node.over = self._dirty = True
        node.times["finished"] = self.now()
        return TaskSkipped(node.task.id, node.task.task, reason)

    def _start(self, node: Node) -> Generator[Event, None, None]:
        assert node.choice is not None
        if self.first_start is None:
            self.first_start = self.now()
            yield StageStarted(Stage.EXECUTE)
        node.started = True
        self.running += 1
        records = {i: n.record for i, n in self.nodes.items()}
        ctx = replace(self.ctx, cancelled=node.stop)
        if any(n.task.id == node.task.id for n in self.every[: node.serial]):
            # a dropped task of the same id may still be writing in task-<id>: another folder
            ctx = replace(ctx, run_dir=ctx.run_dir / f"replacement-{node.serial}")
        inbox = _WorkerInbox(self.inbox, node.serial)
        # in the caller's context: a task's span (and its traceparent) joins the request's trace
        self.pool.submit(
            contextvars.copy_context().run, run_task, node.task, node.choice, records, ctx, inbox
        )

    def _from_worker(self, message: _FromWorker) -> Event | None:
        """The worker's event to show, if any (a dropped task's work is not shown)."""
        node, inner = self.every[message.serial], message.message
        if isinstance(inner, Finished):
            self.running -= 1
            node.over = self._dirty = True
            node.times.setdefault("finished", self.now())
            self.last_finish = self.now()
            return None
        if isinstance(inner, TaskStarted):
            node.times.setdefault("started", self.now())
        return inner if self.nodes.get(node.task.id) is node else None

    # ---- after the run ----------------------------------------------------------------------

    def now(self) -> float:
        return round(time.perf_counter() - self.t0, 4)

    def records(self, plan: Plan) -> list[TaskRecord]:
        return [self.nodes[t.id].record for t in plan.tasks]

    def choices(self) -> dict[int, Choice]:
        return {i: n.choice for i, n in self.nodes.items() if n.choice is not None}


def execute_steps(
    plan: Plan, choices: dict[int, Choice], ctx: RunContext
) -> Generator[Event, None, list[TaskRecord]]:
    """Run a whole plan: yields events as tasks start and end; returns one record per task, in
    plan order."""
    graph = TaskGraph(ctx)
    for task in plan.tasks:
        graph.add(task, choices[task.id])
    graph.close()
    yield from graph.run()
    return graph.records(plan)
