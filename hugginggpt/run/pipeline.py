"""The orchestrator's public face: answer a request, plan only, run a given plan, re-run after an
edit. Each starts a RequestRun (request_run.py) that yields events as it goes and ends with Done."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings
from hugginggpt.costs.estimate import Estimator
from hugginggpt.endpoints import Credentials, Endpoint
from hugginggpt.endpoints.observed import ObservedEndpoint
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.interface import LLM, Message
from hugginggpt.observability import metrics, run_spans, telemetry
from hugginggpt.observability.observers import Observer, observed
from hugginggpt.run import journal
from hugginggpt.run.cache import CachingEndpoint, ResultCache
from hugginggpt.run.events import Done, ErrorKind, Event, Outcome
from hugginggpt.run.request_run import RequestRun
from hugginggpt.run.run_mode import RunMode
from hugginggpt.stages.plan import FileRules, Plan, validate_plan
from hugginggpt.stages.planfile import Edit, GivenPlan, PlanFileError, apply_edits, choices_as_ran
from hugginggpt.stages.selection import Choice

log = logging.getLogger(__name__)


class Pipeline:
    """Every method is a generator of events that always ends with one Done; failures are reported
    in it, never raised. `files` are the user's new uploads (copied into the workspace)."""

    def __init__(
        self,
        *,
        llm: LLM,
        catalog: Catalog,
        endpoint: Endpoint,
        settings: Settings | None = None,
        cache: ResultCache | None = None,
        cache_scope: str | None = None,
        credentials: Credentials | None = None,
    ):
        self.llm = llm
        self.catalog = catalog
        self.endpoint = endpoint
        self.settings = settings or Settings()
        self.cache = cache  # None: every task runs (factory.build_cache makes one from the settings)
        # Whose entries these runs share (e.g. an API caller's key); None: settings.cache_scope decides.
        self.cache_scope = cache_scope
        self.credentials = credentials or Credentials()  # whom the model calls are made for
        self.estimator = Estimator(Path(self.settings.workdir) / ".estimates")  # learnt seconds, sizes

    @property
    def cache(self) -> ResultCache | None:
        return self._cache

    @cache.setter
    def cache(self, cache: ResultCache | None) -> None:
        """The endpoint's stack is built here, once for every run: the result cache (each call says
        its scope, Call.cache_scope) and, outermost, the observer (a span and metrics per attempt)."""
        self._cache = cache
        inner = self.endpoint if cache is None else CachingEndpoint(self.endpoint, cache)
        self.stack: Endpoint = ObservedEndpoint(inner, where=self.endpoint.name)

    def run(
        self,
        request: str,
        *,
        workspace: Workspace,
        files: Sequence[Path] = (),
        history: Sequence[Message] = (),
        cancelled: threading.Event | None = None,
    ) -> Iterator[Event]:
        """Answer one request: plan, select, execute, respond."""
        yield from self._start(request, workspace, files, history, cancelled, RunMode())

    def plan_only(
        self,
        request: str,
        *,
        workspace: Workspace,
        files: Sequence[Path] = (),
        history: Sequence[Message] = (),
        cancelled: threading.Event | None = None,
    ) -> Iterator[Event]:
        """Plan and select, run nothing: Done (outcome PLANNED) carries the plan and the choices,
        seeds included, for a person to review, edit (planfile.apply_edits) and pass to run_plan."""
        yield from self._start(request, workspace, files, history, cancelled, RunMode(stop_after_select=True))

    def run_plan(
        self,
        request: str,
        plan: Plan,
        choices: Mapping[int, Choice] | None = None,
        *,
        workspace: Workspace,
        files: Sequence[Path] = (),
        history: Sequence[Message] = (),
        cancelled: threading.Event | None = None,
        seeds: Mapping[int, int] | None = None,
        answer: bool = True,
        plan_only: bool = False,
        use_cache: bool = True,
        header: Mapping[str, Any] | None = None,
    ) -> Iterator[Event]:
        """Run a given plan: no planning call, and no selection call for the tasks in `choices`.

        The plan goes through the same validator as the LLM's. `seeds` overrides seeds by task id;
        `answer=False` stops before the answer (outcome EXECUTED); `plan_only` stops after selection;
        `use_cache=False` runs every task (replay); `header` adds fields to the trace."""
        mode = RunMode(
            plan=plan,
            choices=dict(choices or {}),
            seeds=dict(seeds or {}),
            stop_after_select=plan_only,
            answer=answer,
            use_cache=use_cache,
            header=dict(header or {}),
        )
        yield from self._start(request, workspace, files, history, cancelled, mode)

    def rerun(
        self,
        previous: Done | GivenPlan,
        edits: Mapping[int, Edit] | None = None,
        *,
        workspace: Workspace,
        history: Sequence[Message] = (),
        cancelled: threading.Event | None = None,
        answer: bool = True,
        use_cache: bool = True,
        header: Mapping[str, Any] | None = None,
    ) -> Iterator[Event]:
        """Run `previous` again with `edits`: a finished run, or a plan with its models and seeds (the
        app's last run or reviewed plan, a trace). The edited tasks and what depends on them execute,
        every other task comes from the result cache (`use_cache=False`: every task runs, as a replay
        does); the answer is written from the new records. The one way the CLI and every door run a
        plan again. `header` adds fields to the trace (default for a Done: rerun_of its request id)."""
        try:
            if isinstance(previous, Done):
                if previous.plan is None:
                    raise PlanFileError("that run has no plan to run again")
                if header is None:
                    header = {"rerun_of": previous.request_id}
                ran = choices_as_ran(previous.choices, previous.records, self.catalog)
                previous = GivenPlan(previous.plan, ran, request=previous.request)
            plan, choices = apply_edits(previous.plan, previous.choices, edits or {}, self.catalog)
        except PlanFileError as e:
            yield Done(Outcome.FAILED, error=str(e), error_kind=ErrorKind.INPUT)
            return
        yield from self.run_plan(
            previous.request or "",
            plan,
            choices,
            workspace=workspace,
            history=history,
            cancelled=cancelled,
            answer=answer,
            use_cache=use_cache,
            header=header,
        )

    def check_plan(self, plan: Plan, workspace: Workspace) -> list[str]:
        return check_plan(plan, workspace, self.settings)

    def _start(
        self,
        request: str,
        workspace: Workspace,
        files: Sequence[Path],
        history: Sequence[Message],
        cancelled: threading.Event | None,
        mode: RunMode,
    ) -> Iterator[Event]:
        run = RequestRun(self, request, workspace, list(history), cancelled or threading.Event(), mode)
        conversation = telemetry.conversation_id(workspace.root.name)
        watchers = [*run_spans.observers(self.settings, self.llm, conversation), metrics.RunMetrics()]
        run.llm.watchers = watchers  # each LLM call is seen as it starts and ends
        journaling: list[Observer] = []
        if not mode.stop_after_select:  # what a resume needs, on disk before any dependant starts
            start = journal.start_entry(run.header, run.history, self.settings)
            path = journal.journal_path(run.trace_path)
            calls = lambda: run.llm.calls  # noqa: E731 (read at each event: the log grows)
            journaling.append(journal.Journaling(path, start, calls=calls, root=workspace.root))
        yield from observed(run.events(files), *journaling, *watchers)


def check_plan(plan: Plan, workspace: Workspace, settings: Settings) -> list[str]:
    """The validator's problems with a plan in this workspace (planfile.problems_by_task groups
    them by task); empty when it may run."""
    rules = FileRules(uploads=frozenset(workspace.files()), allow_urls=settings.allow_urls)
    return validate_plan(plan, rules)
