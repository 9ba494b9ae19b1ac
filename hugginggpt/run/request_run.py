"""One request's run: its stages in order, its state as they produce it, its trace, and its Done.

Each stage is a generator of events that returns its result; the run goes from one to the next
and ends with exactly one Done. The Pipeline (pipeline.py) starts runs; nothing else does.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hugginggpt.costs.estimate import side_by_side
from hugginggpt.costs.limits import LimitRefused, Limits, Screen
from hugginggpt.files.artifacts import kind_of_file
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.interface import LLMError, Message
from hugginggpt.observability.usage import Prices, Usage
from hugginggpt.run.cache import run_scope
from hugginggpt.run.events import (
    Done,
    ErrorKind,
    Estimated,
    Event,
    ModelSelected,
    Outcome,
    PickSource,
    PlanReady,
    Stage,
    StageStarted,
)
from hugginggpt.run.records import TaskRecord
from hugginggpt.run.run_mode import RunMode, RunParts, execution_settings
from hugginggpt.run.seeds import with_seeds
from hugginggpt.run.streaming_run import StreamingRun
from hugginggpt.run.task_graph import execute_steps
from hugginggpt.run.trace import build_trace, write_trace
from hugginggpt.stages.execute import RunContext
from hugginggpt.stages.plan import FileRules, Plan, PlanLimits
from hugginggpt.stages.planner import FileInfo, PlanOutcome, plan_steps, trim_history
from hugginggpt.stages.respond import respond_steps
from hugginggpt.stages.selection import Choice, select_steps

log = logging.getLogger(__name__)


class _Failed(Exception):
    """Ends a run early with a failure of a known kind."""

    def __init__(self, kind: ErrorKind, message: str):
        super().__init__(message)
        self.kind = kind


class _Cancelled(Exception):
    """Ends a run early because it was stopped."""


class RequestRun:
    """The state of one request: its parts as the stages produce them, and its timings."""

    def __init__(
        self,
        pipeline: RunParts,
        request: str,
        workspace: Workspace,
        history: list[Message],
        cancelled: threading.Event,
        mode: RunMode,
    ):
        self.p = pipeline
        self.mode = mode
        self.s = pipeline.settings
        self.request = request
        self.workspace = workspace
        self.history = history
        self.cancelled = cancelled
        self.request_id = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        # This request's own call log; a call in flight ends on Stop and at the request's deadline.
        self.llm = pipeline.llm.recording(stop=cancelled)
        self.trace_path = workspace.trace_path(self.request_id)
        self.header = {
            "request_id": self.request_id,
            "request": request,
            "llm": pipeline.llm.describe(),
            "endpoint": pipeline.endpoint.describe(),
            **mode.header,
        }
        if mode.plan is not None:
            self.header["plan_given"] = True
        self.planning: PlanOutcome | None = None
        self.plan: Plan | None = None
        self.choices: dict[int, Choice] | None = None
        self.records: list[TaskRecord] = []
        self.answer: list[str] = []
        self.timings: dict[str, float] = {}
        self.trace_saved = False
        self.incomplete: str | None = None
        self.over_time = threading.Event()  # the request ran past request_seconds
        self.plan_stream: dict[str, Any] | None = None  # task timings of a streaming run

    def events(self, files: Sequence[Path]) -> Iterator[Event]:
        started = time.perf_counter()
        outcome, error, kind = Outcome.ANSWERED, None, None
        timer = threading.Timer(self.s.request_seconds, self._time_up)
        timer.daemon = True
        timer.start()
        try:
            if len(self.request) > self.s.max_request_chars:
                raise _Failed(
                    ErrorKind.INPUT,
                    f"The request is {len(self.request):,} characters long; "
                    f"at most {self.s.max_request_chars:,} are accepted.",
                )
            new_files = [self.workspace.add_upload(Path(f)) for f in files]
            yield from self._stages(new_files)
            if self.mode.stop_after_select:
                outcome = Outcome.PLANNED
            elif not self.mode.answer:
                outcome = Outcome.EXECUTED
        except _Cancelled:
            outcome = Outcome.CANCELLED
            if self.over_time.is_set():
                outcome, kind = Outcome.FAILED, ErrorKind.LIMIT
                error = (
                    f"The request took longer than its limit of {self.s.request_seconds:g} s and was stopped."
                )
        except _Failed as e:
            outcome, error, kind = Outcome.FAILED, str(e), e.kind
        except LLMError as e:
            outcome, error, kind = Outcome.FAILED, str(e), ErrorKind.LLM
        except Exception as e:
            if self.cancelled.is_set():  # e.g. the page was left and its folder deleted under the run
                log.info("request %s ended after a stop: %s: %s", self.request_id, type(e).__name__, e)
                outcome = Outcome.CANCELLED
            else:  # a bug: logged with its stack trace, reported without it
                log.exception("request %s failed", self.request_id)
                outcome, error = (
                    Outcome.FAILED,
                    "Internal error while answering; the server log has the details.",
                )
                kind = ErrorKind.INTERNAL
        finally:
            timer.cancel()
            self.timings["total"] = time.perf_counter() - started
        answer = "".join(self.answer)
        estimates = side_by_side(self.choices or {}, self.records)
        end = {
            "outcome": str(outcome),
            "answer": answer,
            "answer_incomplete": self.incomplete,
            "error": error,
            "error_kind": kind and str(kind),
            "estimates": estimates,
        }
        usage = self._usage()
        trace = self._save_trace(end, usage)
        yield Done(
            outcome,
            answer=answer,
            error=error,
            error_kind=kind,
            records=tuple(self.records),
            trace=trace,
            trace_file=self.trace_path if self.trace_saved else None,
            incomplete=self.incomplete,
            plan=self.plan,
            choices=self.choices or {},
            request_id=self.request_id,
            request=self.request,
            usage=usage,
            timings=dict(self.timings),
            estimates=tuple(estimates),
        )

    def _usage(self) -> Usage:
        return Usage.summed(self.llm.calls, Prices(self.s.llm_input_price, self.s.llm_output_price))

    def _time_up(self) -> None:
        self.over_time.set()
        self.cancelled.set()  # everything the run started stops as on Stop

    def _stages(self, new_files: list[Path]) -> Generator[Event, None, None]:
        if self.mode.plan is None and self.s.stream_execution and not self.mode.stop_after_select:
            yield from self._streaming_stage(new_files)
            if self.mode.answer:
                yield from self._respond_stage()
            return
        if self.mode.plan is None:
            plan = yield from self._plan_stage(new_files)
        else:
            plan = yield from self._given_plan_stage(self.mode.plan)
        self._checkpoint()
        if plan.tasks:
            choices = yield from self._select_stage(plan)
            if self.mode.stop_after_select:
                return
            self._checkpoint()
            yield from self._execute_stage(plan, choices)
            self._checkpoint()
        if self.mode.answer and not self.mode.stop_after_select:
            yield from self._respond_stage()

    def _given_plan_stage(self, plan: Plan) -> Generator[Event, None, Plan]:
        yield StageStarted(Stage.PLAN)
        problems = self.p.check_plan(plan, self.workspace)
        if problems:
            raise _Failed(ErrorKind.INPUT, "The plan cannot run: " + "; ".join(problems))
        self.plan = plan
        yield PlanReady(plan, 0)  # no attempt: nothing was asked of the LLM
        return plan

    def _plan_options(self, new_files: list[Path]) -> dict[str, Any]:
        available = self.workspace.files()
        infos = [
            FileInfo(kind_of_file(path) or "file", name, new=path in new_files)
            for name, path in available.items()
        ]
        return dict(
            files=infos,
            history=self.history,
            shots=self.s.shots,
            max_retries=self.s.max_plan_retries,
            rules=FileRules(uploads=frozenset(available), allow_urls=self.s.allow_urls),
            history_tokens=self.s.history_tokens,
            limits=PlanLimits(max_chars=self.s.max_plan_chars, max_tasks=self.s.max_plan_tasks),
        )

    def _plan_stage(self, new_files: list[Path]) -> Generator[Event, None, Plan]:
        yield StageStarted(Stage.PLAN)
        with self._timed(Stage.PLAN):
            self.planning = yield from plan_steps(  # rejected plans are shown as they happen
                self.llm, self.request, cancelled=self.cancelled, **self._plan_options(new_files)
            )
        if self.planning.plan is None:
            self._checkpoint()  # stopped while planning: no failure to report
            raise _Failed(
                ErrorKind.PLAN, f"I could not make a valid plan for this request. {self.planning.error}"
            )
        self.plan = self.planning.plan
        yield PlanReady(self.plan, self.planning.attempts)
        return self.plan

    def _select_stage(self, plan: Plan) -> Generator[Event, None, dict[int, Choice]]:
        yield StageStarted(Stage.SELECT)
        given = {t.id: self.mode.choices[t.id] for t in plan.tasks if t.id in self.mode.choices}
        for c in given.values():
            if c.model is not None:
                candidates = [m.id for m in c.candidates]
                yield ModelSelected(c.task_id, c.task, c.model.id, c.reason, candidates, c.source)
        open_tasks = Plan([t for t in plan.tasks if t.id not in given])
        selected: dict[int, Choice] = {}
        screen = Screen(Limits.from_settings(self.s), self.p.estimator, self.p.endpoint)
        with self._timed(Stage.SELECT):
            if open_tasks.tasks:  # one LLM call at most, and only for tasks with a real choice
                selected = yield from select_steps(
                    self.llm,
                    open_tasks,
                    self.p.catalog,
                    self.request,
                    runnable=screen.runnable(self.p.endpoint.can_run),
                    k=self.s.top_k,
                    candidate_tokens=self.s.candidate_tokens,
                )
            try:  # estimates, and the limits kept before any model runs
                screened = screen.finish(plan, {**given, **selected})
            except LimitRefused as e:
                raise _Failed(ErrorKind.LIMIT, f"No model fits your limits: {e}.") from None
        for c in screened.values():  # a pick swapped for a smaller download is shown again
            if c.model is not None and c.source is PickSource.LIMIT:
                yield ModelSelected(
                    c.task_id, c.task, c.model.id, c.reason, [m.id for m in c.candidates], c.source
                )
            if c.model is not None and c.estimate is not None:
                yield Estimated(c.task_id, c.task, c.model.id, c.estimate, c.excluded)
        self.choices = with_seeds(plan, screened, self.s.seed, self.mode.seeds)
        return self.choices

    def _streaming_stage(self, new_files: list[Path]) -> Generator[Event, None, None]:
        """Plan, select and execute at once: tasks start while the LLM writes the plan."""
        yield StageStarted(Stage.PLAN)
        stream = StreamingRun(
            llm=self.llm,
            request=self.request,
            catalog=self.p.catalog,
            ctx=self._run_context(),
            settings=self.s,
            plan_options=self._plan_options(new_files),
            screen=Screen(Limits.from_settings(self.s), self.p.estimator, self.p.endpoint),
        )
        try:
            yield from stream.events()
        except LimitRefused as e:
            raise _Failed(ErrorKind.LIMIT, f"No model fits your limits: {e}.") from None
        finally:
            self.planning, self.plan, self.choices = stream.planning, stream.plan, stream.choices
            self.records, self.plan_stream = stream.records, stream.trace()
            self.timings.update(stream.timings)
        if self.choices:
            self.p.estimator.learn(self.choices, self.records)
        if self.plan is None:
            self._checkpoint()  # stopped while planning: no failure to report
            error = self.planning.error if self.planning else ""
            raise _Failed(ErrorKind.PLAN, f"I could not make a valid plan for this request. {error}")
        self._checkpoint()

    def _execute_stage(self, plan: Plan, choices: dict[int, Choice]) -> Generator[Event, None, None]:
        with self._timed(Stage.EXECUTE):
            self.records = yield from execute_steps(plan, choices, self._run_context())
        self.p.estimator.learn(choices, self.records)

    def _run_context(self) -> RunContext:
        scope = None  # not cached
        if self.p.cache is not None and self.mode.use_cache:
            scope = run_scope(self.p.cache_scope, self.s.cache_scope, self.workspace.root)
        return RunContext(
            endpoint=self.p.stack,
            cache_scope=scope,
            workspace=self.workspace,
            run_dir=self.workspace.run_dir(self.request_id),
            settings=execution_settings(self.s),
            cancelled=self.cancelled,
            credentials=self.p.credentials,
        )

    def _respond_stage(self) -> Generator[Event, None, None]:
        yield StageStarted(Stage.RESPOND)
        with self._timed(Stage.RESPOND):
            # The same history budget as planning: a long conversation must not overflow the context.
            history = trim_history(self.history, self.s.history_tokens)
            answer = respond_steps(
                self.llm,
                self.request,
                self.records,
                self.workspace,
                history,
                self.cancelled,
                max_tokens=self.s.answer_max_tokens,
                max_chars=self.s.max_answer_chars,
            )
            while True:
                try:
                    delta = next(answer)
                except StopIteration as end:
                    self.incomplete = end.value
                    break
                self.answer.append(delta.text)
                yield delta
        self._checkpoint()

    def _checkpoint(self) -> None:
        """Between stages: the trace so far is written (a run that dies leaves it), and after Stop
        no further LLM call or model run starts."""
        self._save_trace()
        if self.cancelled.is_set():
            raise _Cancelled

    @contextmanager
    def _timed(self, stage: Stage):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[str(stage)] = time.perf_counter() - t0

    def _save_trace(self, end: dict[str, Any] | None = None, usage: Usage | None = None) -> dict[str, Any]:
        trace = build_trace(
            self.header,
            max_field_chars=self.s.max_trace_field_chars,
            root=self.workspace.root,
            planning=self.planning,
            plan=self.plan,
            choices=self.choices,
            records=self.records,
            calls=list(self.llm.calls),
            timings=self.timings,
            end=end,
            plan_stream=self.plan_stream,
            usage=usage or self._usage(),
        )
        try:
            write_trace(self.trace_path, trace)
            self.trace_saved = True
        except OSError as e:  # the conversation's folder went away (page left): nothing to keep
            log.info("trace of %s not written: %s", self.request_id, e)
            self.trace_saved = False
        return trace
