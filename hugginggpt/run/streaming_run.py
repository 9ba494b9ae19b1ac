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

import logging
import threading
import time
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings
from hugginggpt.costs.limits import Screen
from hugginggpt.llms.interface import LLM
from hugginggpt.run.events import (
    Estimated,
    Event,
    ModelSelected,
    PickSource,
    PlanReady,
    PlanRejected,
    TaskPlanned,
)
from hugginggpt.run.records import TaskRecord
from hugginggpt.run.seeds import with_seeds
from hugginggpt.run.steps import drain
from hugginggpt.run.task_graph import Node, TaskGraph
from hugginggpt.stages.execute import RunContext
from hugginggpt.stages.plan import FileRules, Plan, PlanLimits, Task
from hugginggpt.stages.plan_stream import TaskScanner, read_task
from hugginggpt.stages.planner import PlanOutcome, plan_steps
from hugginggpt.stages.selection import Choice, select_steps

log = logging.getLogger(__name__)

MAX_SELECT_CALLS = 2  # one while the plan streams, one for the rest when it ends


# Messages into the loop's inbox, besides PlanRejected.
@dataclass(frozen=True)
class _Piece:
    text: str


@dataclass(frozen=True)
class _Planned:
    outcome: PlanOutcome


@dataclass(frozen=True)
class _Picked:
    serials: dict[int, int]  # task id -> serial of the node that was asked about
    choices: dict[int, Choice]
    events: list[ModelSelected]
    seconds: float


@dataclass(frozen=True)
class _Crashed:
    error: BaseException


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
        screen: Screen,
    ) -> None:
        """`screen`: the user's limits and the models' estimates (limits.Screen). With a limit set,
        the whole plan's choices are screened at once before any task starts: the graph holds its
        start until then, while tasks arrive, get their models and are warmed."""
        self.screen = screen
        self.whole_plan = screen.limits.active
        self.runnable = screen.runnable(ctx.endpoint.can_run)
        self.llm = llm
        self.request = request
        self.catalog = catalog
        self.ctx = ctx
        self.s = settings
        self.plan_options = plan_options  # for plan_steps: files, history, rules, limits, ...
        self.rules: FileRules = plan_options["rules"]
        self.cancelled = ctx.cancelled
        self.graph = TaskGraph(ctx, hold=self.whole_plan)
        self.inbox = self.graph.inbox  # the planner's and the selection calls' messages go there too
        self.scanner = TaskScanner(plan_options.get("limits") or PlanLimits())
        self.open: set[int] = set()  # serials of tasks with a real choice to make
        self.asked: set[int] = set()  # serials of tasks a selection call is about
        self.accepted: list[Task] = []  # streamed tasks valid on their own, in order
        self.seen = 0  # task objects read from the stream
        self.planning: PlanOutcome | None = None
        self.plan: Plan | None = None
        self.choices: dict[int, Choice] = {}
        self.rejected = False  # the streamed plan was rejected: none of its waiting tasks starts
        self.records: list[TaskRecord] = []
        self.select_calls = 0
        self.selecting = 0  # calls in flight
        self.timings: dict[str, float] = {}

    # ---- the loop ---------------------------------------------------------------------------

    def events(self) -> Generator[Event, None, None]:
        threading.Thread(target=self._plan_thread, daemon=True, name="plan-stream").start()
        try:
            yield from self.graph.run(self._handle)
        finally:
            if self.graph.first_start is not None and self.graph.last_finish is not None:
                self.timings["execute"] = self.graph.last_finish - self.graph.first_start
            if self.plan is not None:
                self.records = self.graph.records(self.plan)
                self.choices = self.graph.choices()

    def _handle(self, message: Any) -> Generator[Event, None, None]:
        match message:
            case _Piece(text=text):
                for raw in self.scanner.feed(text):
                    yield from self._arrived(raw)
            case PlanRejected():
                self.rejected = self.graph.hold = True  # none of the rejected plan's waiting tasks starts
                yield message
            case _Planned(outcome=outcome):
                yield from self._plan_ended(outcome)
            case _Picked():
                yield from self._picked(message)
            case _Crashed(error=error):
                raise error
        if self.planning is not None and (self.plan is None or self.selecting == 0) and not self.graph.closed:
            if self.plan is not None and self.whole_plan:
                yield from self._screened(self.plan)
            self.graph.close()

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

            def rejected(message: PlanRejected) -> None:
                nonlocal attempt
                attempt += 1
                self.inbox.put(message)

            outcome = drain(steps, rejected)
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
        node = self.graph.add(task)
        yield TaskPlanned(task)
        yield from self._choose([node])

    def _plan_ended(self, outcome: PlanOutcome) -> Generator[Event, None, None]:
        self.planning = outcome
        self.timings["plan"] = self.graph.now()
        if outcome.plan is None:  # no valid plan: nothing started from the stream counts
            for node in list(self.graph.nodes.values()):
                yield self.graph.drop(node, "no valid plan was made")
            return
        plan = outcome.plan
        kept = self._kept(plan)
        for task_id, node in list(self.graph.nodes.items()):
            if task_id not in kept:
                yield self.graph.drop(node, "the corrected plan does not have this task as it was")
        self.plan, self.rejected, self.graph.hold = plan, False, self.whole_plan
        yield PlanReady(plan, outcome.attempts)
        yield from self._choose([self.graph.add(t) for t in plan.tasks if t.id not in self.graph.nodes])

    def _kept(self, plan: Plan) -> set[int]:
        """Ids of the streamed tasks the plan holds unchanged, with every dependency kept too (a
        task fed by a dropped one would have used the wrong input)."""
        final, nodes = plan.by_id(), self.graph.nodes
        kept = {i for i, node in nodes.items() if final.get(i) == node.task}
        changed = True
        while changed:
            lost = {i for i in kept if not set(nodes[i].task.dep) <= kept}
            kept -= lost
            changed = bool(lost)
        return kept

    # ---- selection --------------------------------------------------------------------------

    def _choose(self, nodes: Iterable[Node]) -> Generator[Event, None, None]:
        """Tasks with one candidate (or none) are chosen here, with no LLM call; the others wait
        for a selection call, started now if the budget allows."""
        for node in nodes:
            offered = self.catalog.candidates(node.task.task, k=self.s.top_k, runnable=self.runnable)
            if len(offered) > 1:
                self.open.add(node.serial)
                continue
            choices = yield from self._select([node.task])  # no LLM call: nothing to choose
            yield from self._set_choice(node, choices[node.task.id])
        waiting = [n for n in self.graph.nodes.values() if n.serial in self.open - self.asked]
        # While the plan streams one call goes out; the rest wait for the end of the plan.
        if (
            waiting
            and self.select_calls < MAX_SELECT_CALLS
            and (self.plan is not None or not self.select_calls)
        ):
            self._ask(waiting)

    def _ask(self, nodes: list[Node]) -> None:
        self.select_calls += 1
        self.selecting += 1
        self.asked.update(n.serial for n in nodes)
        serials = {n.task.id: n.serial for n in nodes}
        plan = Plan([n.task for n in nodes])

        def call() -> None:
            started = time.perf_counter()
            try:
                events: list[ModelSelected] = []
                choices = drain(self._select(plan.tasks), events.append)
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
            runnable=self.runnable,
            k=self.s.top_k,
            candidate_tokens=self.s.candidate_tokens,
        )

    def _picked(self, picked: _Picked) -> Generator[Event, None, None]:
        self.selecting -= 1
        self.timings["select"] = self.timings.get("select", 0.0) + picked.seconds
        events = {e.task_id: e for e in picked.events}
        for task_id, serial in picked.serials.items():
            node = self.graph.every[serial]
            if self.graph.nodes.get(task_id) is not node:  # dropped while the call ran
                continue
            if task_id in events:
                yield events[task_id]
            yield from self._set_choice(node, picked.choices[task_id])

    def _set_choice(self, node: Node, choice: Choice) -> Generator[Event, None, None]:
        task = node.task
        if not self.whole_plan and choice.model is not None:  # else `_screened` gives its estimate
            choice = self.screen.estimated(choice)
            if choice.model is not None and choice.estimate is not None:
                yield Estimated(task.id, task.task, choice.model.id, choice.estimate, choice.excluded)
        self.graph.choose(node, with_seeds(Plan([task]), {task.id: choice}, self.s.seed)[task.id])

    def _screened(self, plan: Plan) -> Generator[Event, None, None]:
        """The whole plan's choices within the limits, with their estimates (LimitRefused when a task
        has no model left); a pick swapped for a smaller download is shown again."""
        nodes = self.graph.nodes
        screened = self.screen.finish(plan, {i: n.choice for i, n in nodes.items() if n.choice is not None})
        for c in screened.values():
            if c.model is not None and c.source is PickSource.LIMIT:
                candidates = [m.id for m in c.candidates]
                yield ModelSelected(c.task_id, c.task, c.model.id, c.reason, candidates, c.source)
            if c.model is not None and c.estimate is not None:
                yield Estimated(c.task_id, c.task, c.model.id, c.estimate, c.excluded)
            self.graph.choose(nodes[c.task_id], c)

    # ---- the trace --------------------------------------------------------------------------

    def trace(self) -> dict[str, Any]:
        """Seconds from the start of planning: when each task was parsed, selected, started and
        finished (and dropped, for those the plan that counts did not keep)."""
        return {"tasks": [node.times for node in self.graph.every], "select_calls": self.select_calls}
