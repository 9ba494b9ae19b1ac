"""Streaming execution: tasks start while the LLM is still writing the plan.

One loop reads one inbox. Into it come the pieces of the planning reply (a planner thread runs
planner.plan_steps, corrections included), the results of selection calls (a thread each) and the
workers' events (execute.run_task). Each task object is taken the moment it is complete
(plan_stream.py); a task valid on its own gets its model at once when there is no choice to make,
or from a selection call (one while the plan streams, one for the rest when it ends: two at most),
and starts as soon as its dependencies are done. Waiting for its inputs, its model is warmed.

When the reply ends, the whole-plan checks decide, as without streaming. After a rejection, no
further task of the rejected plan starts; once the corrected plan is in, the tasks it still holds
(same id, task, arguments and dependencies, with all their dependencies kept too) keep running or
keep their results, and the others are stopped and reported as dropped: their work never reaches
the records, the trace's tasks or the answer (a done one stays in the result cache, which serves
the corrected plan's same task under another id).
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from .catalog import Catalog
from .config import Settings
from .events import (
    Estimated,
    Event,
    ModelSelected,
    PlanReady,
    PlanRejected,
    Stage,
    StageStarted,
    TaskDropped,
    TaskPlanned,
    TaskSkipped,
    TaskStarted,
)
from .execute import Finished, RunContext, run_task
from .llm import LLM
from .plan import FileRules, Plan, PlanLimits, Task
from .plan_stream import TaskScanner, read_task
from .planner import PlanOutcome, plan_steps
from .records import TaskRecord, TaskStatus
from .seeds import with_seeds
from .selection import Choice, select_steps

log = logging.getLogger(__name__)

MAX_SELECT_CALLS = 2  # one while the plan streams, one for the rest when it ends


class _TaskStop(threading.Event):
    """A task's stop signal: set when the task is dropped, and read as set once the run stops."""

    def __init__(self, run: threading.Event) -> None:
        super().__init__()
        self.run = run

    def is_set(self) -> bool:
        return super().is_set() or self.run.is_set()


@dataclass
class _Slot:
    """A task the loop knows, from the streamed plan or from the plan that counts."""

    task: Task
    serial: int  # unique: a dropped task and its replacement may share an id
    record: TaskRecord
    stop: _TaskStop
    choice: Choice | None = None
    open: bool = False  # has a real choice to make: waits for a selection call
    asked: bool = False
    started: bool = False
    over: bool = False  # its worker said Finished (only then is its record complete), or skipped
    warmed: bool = False
    times: dict[str, Any] = field(default_factory=dict)


# Messages into the loop's inbox, besides PlanRejected.
@dataclass(frozen=True)
class _Piece:
    text: str


@dataclass(frozen=True)
class _Planned:
    outcome: PlanOutcome


@dataclass(frozen=True)
class _Picked:
    serials: dict[int, int]  # task id -> serial of the slot that was asked about
    choices: dict[int, Choice]
    events: list[ModelSelected]
    seconds: float


@dataclass(frozen=True)
class _Crashed:
    error: BaseException


@dataclass(frozen=True)
class _FromWorker:
    serial: int
    message: Event | Finished


class _WorkerInbox:
    """What one worker posts, tagged with its slot."""

    def __init__(self, inbox: queue.Queue[Any], serial: int) -> None:
        self.inbox = inbox
        self.serial = serial

    def put(self, item: Event | Finished) -> None:
        self.inbox.put(_FromWorker(self.serial, item))


class _StreamStopped(Exception):
    """Raised into the planning call from its reader once the run is stopped: the call ends."""


class StreamingRun:
    """Plan, select and execute at once for one request. After `events()`: `planning`, `plan`
    (None: no valid plan), `choices`, `records`, `timings` and `trace()`."""

    def __init__(
        self,
        *,
        llm: LLM,
        request: str,
        catalog: Catalog,
        ctx: RunContext,
        settings: Settings,
        plan_options: dict[str, Any],
        estimated: Callable[[Choice], Choice] | None = None,
    ) -> None:
        """`estimated`: a chosen model's choice with its estimate (limits.Screen.estimated)."""
        self.estimated = estimated
        self.llm = llm
        self.request = request
        self.catalog = catalog
        self.ctx = ctx
        self.s = settings
        self.plan_options = plan_options  # for plan_steps: files, history, rules, limits, ...
        self.rules: FileRules = plan_options["rules"]
        self.cancelled = ctx.cancelled
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.scanner = TaskScanner(plan_options.get("limits") or PlanLimits())
        self.slots: dict[int, _Slot] = {}  # by task id: the tasks that count now
        self.every: list[_Slot] = []  # by serial: dropped ones too (their workers may still post)
        self.accepted: list[Task] = []  # streamed tasks valid on their own, in order
        self.seen = 0  # task objects read from the stream
        self.planning: PlanOutcome | None = None
        self.plan: Plan | None = None
        self.choices: dict[int, Choice] = {}
        self.records: list[TaskRecord] = []
        self.rejected = False  # the streamed plan was rejected: none of its waiting tasks starts
        self.select_calls = 0
        self.selecting = 0  # calls in flight
        self.running = 0
        self.timings: dict[str, float] = {}
        self.t0 = time.perf_counter()
        self._first_start: float | None = None
        self.pool = ThreadPoolExecutor(settings.max_workers, thread_name_prefix="task")
        self.warmer = ThreadPoolExecutor(1, thread_name_prefix="warm")  # loads are one at a time anyway

    # ---- the loop ---------------------------------------------------------------------------

    def events(self) -> Generator[Event, None, None]:
        threading.Thread(target=self._plan_thread, daemon=True, name="plan-stream").start()
        finished = False
        try:
            while not self._over():
                yield from self._handle(self.inbox.get())
                yield from self._schedule()
            finished = True
        finally:
            if not finished:  # a failure, or a consumer that stopped listening: nothing keeps running
                for slot in self.every:
                    slot.stop.set()
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.warmer.shutdown(wait=False, cancel_futures=True)
            self._settle()

    def _over(self) -> bool:
        if self.running:
            return False
        if self.cancelled.is_set():
            return True
        return self.planning is not None and (self.plan is None or self.selecting == 0)

    def _handle(self, message: Any) -> Generator[Event, None, None]:
        match message:
            case _Piece(text=text):
                for raw in self.scanner.feed(text):
                    yield from self._arrived(raw)
            case PlanRejected():
                self.rejected = True
                yield message
            case _Planned(outcome=outcome):
                yield from self._plan_ended(outcome)
            case _Picked():
                yield from self._picked(message)
            case _FromWorker(serial=serial, message=inner):
                yield from self._from_worker(self.every[serial], inner)
            case _Crashed(error=error):
                raise error

    # ---- planning ---------------------------------------------------------------------------

    def _plan_thread(self) -> None:
        attempt = 1

        def on_piece(piece: str) -> None:
            if self.cancelled.is_set():
                raise _StreamStopped
            if attempt == 1:  # corrections are read whole, as without streaming
                self.inbox.put(_Piece(piece))

        try:
            steps = plan_steps(
                self.llm, self.request, cancelled=self.cancelled, on_piece=on_piece, **self.plan_options
            )
            while True:
                try:
                    rejected = next(steps)
                except StopIteration as end:
                    outcome: PlanOutcome = end.value
                    break
                attempt += 1
                self.inbox.put(rejected)
        except _StreamStopped:
            outcome = PlanOutcome(plan=None)  # stopped: no plan and no error, as plan_steps says
        except BaseException as e:  # the LLM failing (LLMError), or a bug: the loop raises it
            self.inbox.put(_Crashed(e))
            return
        self.inbox.put(_Planned(outcome))

    def _arrived(self, raw: dict[str, Any]) -> Generator[Event, None, None]:
        index, self.seen = self.seen, self.seen + 1
        if self.rejected or self.cancelled.is_set():
            return
        task = read_task(raw, index, self.accepted, self.rules)
        if task is None:  # not valid on its own (yet): it waits for the whole plan
            return
        self.accepted.append(task)
        slot = self._add(task)
        yield TaskPlanned(task)
        yield from self._choose([slot])

    def _plan_ended(self, outcome: PlanOutcome) -> Generator[Event, None, None]:
        self.planning = outcome
        self.timings["plan"] = self._now()
        if outcome.plan is None:  # no valid plan: nothing started from the stream counts
            for slot in list(self.slots.values()):
                yield from self._drop(slot, "no valid plan was made")
            return
        plan = outcome.plan
        kept = self._kept(plan)
        for task_id, slot in list(self.slots.items()):
            if task_id not in kept:
                yield from self._drop(slot, "the corrected plan does not have this task as it was")
        self.plan, self.rejected = plan, False
        yield PlanReady(plan, outcome.attempts)
        yield from self._choose([self._add(t) for t in plan.tasks if t.id not in self.slots])

    def _kept(self, plan: Plan) -> set[int]:
        """Ids of the streamed tasks the plan holds unchanged, with every dependency kept too (a
        task fed by a dropped one would have used the wrong input)."""
        final = plan.by_id()
        kept = {i for i, slot in self.slots.items() if final.get(i) == slot.task}
        changed = True
        while changed:
            lost = {i for i in kept if not set(self.slots[i].task.dep) <= kept}
            kept -= lost
            changed = bool(lost)
        return kept

    def _add(self, task: Task) -> _Slot:
        slot = _Slot(
            task, len(self.every), TaskRecord(task.id, task.task, dict(task.args)), _TaskStop(self.cancelled)
        )
        slot.times = {"id": task.id, "task": task.task, "parsed": self._now()}
        self.slots[task.id] = slot
        self.every.append(slot)
        return slot

    def _drop(self, slot: _Slot, reason: str) -> Generator[Event, None, None]:
        slot.stop.set()
        del self.slots[slot.task.id]
        slot.times["dropped"] = self._now()
        yield TaskDropped(slot.task.id, slot.task.task, reason)

    # ---- selection --------------------------------------------------------------------------

    def _choose(self, slots: Iterable[_Slot]) -> Generator[Event, None, None]:
        """Tasks with one candidate (or none) are chosen here, with no LLM call; the others wait
        for a selection call, started now if the budget allows."""
        for slot in slots:
            offered = self.catalog.candidates(
                slot.task.task, k=self.s.top_k, runnable=self.ctx.endpoint.can_run
            )
            if len(offered) > 1:
                slot.open = True
                continue
            choices = yield from self._select([slot.task])  # no LLM call: nothing to choose
            yield from self._set_choice(slot, choices[slot.task.id])
        waiting = [s for s in self.slots.values() if s.open and not s.asked]
        # While the plan streams one call goes out; the rest wait for the end of the plan.
        if (
            waiting
            and self.select_calls < MAX_SELECT_CALLS
            and (self.plan is not None or not self.select_calls)
        ):
            self._ask(waiting)

    def _ask(self, slots: list[_Slot]) -> None:
        self.select_calls += 1
        self.selecting += 1
        for slot in slots:
            slot.asked = True
        serials = {s.task.id: s.serial for s in slots}
        plan = Plan([s.task for s in slots])

        def call() -> None:
            started = time.perf_counter()
            try:
                steps = self._select(plan.tasks)
                events = []
                while True:
                    try:
                        events.append(next(steps))
                    except StopIteration as end:
                        choices = end.value
                        break
            except BaseException as e:  # a failed call falls back inside select_steps: this is a bug
                self.inbox.put(_Crashed(e))
                return
            self.inbox.put(_Picked(serials, choices, events, time.perf_counter() - started))

        threading.Thread(target=call, daemon=True, name="select").start()

    def _select(self, tasks: list[Task]) -> Generator[ModelSelected, None, dict[int, Choice]]:
        return select_steps(
            self.llm,
            Plan(tasks),
            self.catalog,
            self.request,
            runnable=self.ctx.endpoint.can_run,
            k=self.s.top_k,
            candidate_tokens=self.s.candidate_tokens,
        )

    def _picked(self, picked: _Picked) -> Generator[Event, None, None]:
        self.selecting -= 1
        self.timings["select"] = self.timings.get("select", 0.0) + picked.seconds
        events = {e.task_id: e for e in picked.events}
        for task_id, serial in picked.serials.items():
            slot = self.every[serial]
            if self.slots.get(task_id) is not slot:  # dropped while the call ran
                continue
            if task_id in events:
                yield events[task_id]
            yield from self._set_choice(slot, picked.choices[task_id])

    def _set_choice(self, slot: _Slot, choice: Choice) -> Generator[Event, None, None]:
        task = slot.task
        if self.estimated is not None and choice.model is not None:
            choice = self.estimated(choice)
            if choice.model is not None and choice.estimate is not None:
                yield Estimated(task.id, task.task, choice.model.id, choice.estimate, choice.excluded)
        slot.choice = with_seeds(Plan([task]), {task.id: choice}, self.s.seed)[task.id]
        slot.times["selected"] = self._now()

    # ---- execution --------------------------------------------------------------------------

    def _schedule(self) -> Generator[Event, None, None]:
        """Start every task whose dependencies are done; skip those whose dependencies failed;
        warm the models of those that wait."""
        if self.cancelled.is_set() or (self.rejected and self.plan is None):
            return
        changed = True
        while changed:
            changed = False
            for slot in list(self.slots.values()):
                if slot.started or slot.record.status is not TaskStatus.PENDING or slot.choice is None:
                    continue
                deps = [self.slots.get(d) for d in slot.task.dep]
                over = [d for d in deps if d is not None and d.over]
                broken = next((d for d in over if d.record.status in _BROKEN), None)
                if broken is not None:
                    yield self._skip(slot, broken)
                    changed = True
                elif len(over) == len(deps) and all(d.record.status is TaskStatus.DONE for d in over):
                    yield from self._start(slot)
                elif not slot.warmed and slot.choice.model is not None:
                    slot.warmed = True
                    self.warmer.submit(self.ctx.endpoint.warm, slot.task.task, slot.choice.model)

    def _skip(self, slot: _Slot, broken: _Slot) -> TaskSkipped:
        done = broken.record
        why = "failed" if done.status is TaskStatus.FAILED else "was skipped"
        reason = f"it needs task {done.id} ({done.task}), which {why}"
        slot.record.status, slot.record.error = TaskStatus.SKIPPED, reason
        slot.over = True
        slot.times["finished"] = self._now()
        return TaskSkipped(slot.task.id, slot.task.task, reason)

    def _start(self, slot: _Slot) -> Generator[Event, None, None]:
        assert slot.choice is not None
        if self._first_start is None:
            self._first_start = self._now()
            yield StageStarted(Stage.EXECUTE)
        slot.started = True
        self.running += 1
        records = {i: s.record for i, s in self.slots.items()}
        ctx = replace(self.ctx, cancelled=slot.stop)
        if any(s.task.id == slot.task.id for s in self.every[: slot.serial]):
            # a dropped task of the same id may still be writing in task-<id>: another folder
            ctx = replace(ctx, run_dir=ctx.run_dir / f"replacement-{slot.serial}")
        inbox = _WorkerInbox(self.inbox, slot.serial)
        # in the caller's context: a task's span (and its traceparent) joins the request's trace
        self.pool.submit(
            contextvars.copy_context().run, run_task, slot.task, slot.choice, records, ctx, inbox
        )

    def _from_worker(self, slot: _Slot, message: Event | Finished) -> Generator[Event, None, None]:
        shown = self.slots.get(slot.task.id) is slot  # a dropped task's work is not shown
        if isinstance(message, Finished):
            self.running -= 1
            slot.over = True
            slot.times.setdefault("finished", self._now())
            if self._first_start is not None:
                self.timings["execute"] = self._now() - self._first_start
            return
        if isinstance(message, TaskStarted):
            slot.times.setdefault("started", self._now())
        if shown:
            yield message

    def _settle(self) -> None:
        for slot in self.slots.values():
            if slot.record.status is TaskStatus.PENDING:  # stopped before it could start
                slot.record.status = TaskStatus.STOPPED
        if self.plan is not None:
            self.records = [self.slots[t.id].record for t in self.plan.tasks]
            self.choices = {i: s.choice for i, s in self.slots.items() if s.choice is not None}

    # ---- the trace --------------------------------------------------------------------------

    def _now(self) -> float:
        return round(time.perf_counter() - self.t0, 4)

    def trace(self) -> dict[str, Any]:
        """Seconds from the start of planning: when each task was parsed, selected, started and
        finished (and dropped, for those the plan that counts did not keep)."""
        return {"tasks": [slot.times for slot in self.every], "select_calls": self.select_calls}


_BROKEN = (TaskStatus.FAILED, TaskStatus.SKIPPED)
