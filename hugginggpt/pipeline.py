"""The orchestrator: plan, select, execute, respond, yielding events as it goes."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import urlguard
from .artifacts import kind_of_file
from .catalog import Catalog
from .config import Settings
from .endpoints import Endpoint
from .events import (
    AnswerDelta,
    Done,
    Event,
    ModelSelected,
    PlanReady,
    StageStarted,
)
from .execute import ExecutionSettings, TaskRecord, execute_plan
from .llm import LLM, LLMError, Message
from .plan import FileRules
from .planner import FileInfo, plan_steps, trim_history
from .respond import answer_messages, missing_files
from .select import select_models
from .workspace import Workspace

log = logging.getLogger(__name__)


class Pipeline:
    def __init__(self, *, llm: LLM, catalog: Catalog, endpoint: Endpoint, settings: Settings | None = None):
        self.llm = llm
        self.catalog = catalog
        self.endpoint = endpoint
        self.settings = settings or Settings()

    def run(
        self,
        request: str,
        *,
        workspace: Workspace,
        files: Sequence[Path] = (),
        history: Sequence[Message] = (),
        cancelled: threading.Event | None = None,
    ) -> Iterator[Event]:
        """Answer one request. `files` are the user's new uploads (copied into the workspace).

        Always ends with a Done event; failures are reported in it, never raised.
        """
        run = _Run(self, request, workspace, list(history), cancelled or threading.Event())
        yield from run.events(files)


class _Run:
    """The state of one request: its records, timings and trace."""

    def __init__(
        self, pipeline: Pipeline, request: str, workspace: Workspace, history: list[Message], cancelled
    ):
        self.p = pipeline
        self.request = request
        self.workspace = workspace
        self.history = history
        self.cancelled = cancelled
        self.request_id = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self.llm = pipeline.llm.recording()  # this request's own call log
        self.records: dict[int, TaskRecord] = {}
        self.timings: dict[str, float] = {}
        self.trace: dict[str, Any] = {
            "request_id": self.request_id,
            "request": request,
            "llm": pipeline.llm.describe(),
            "endpoint": pipeline.endpoint.describe(),
        }

    def events(self, files: Sequence[Path]) -> Iterator[Event]:
        started = time.perf_counter()
        answer, error = "", None
        try:
            new_files = [self.workspace.add_upload(Path(f)) for f in files]
            answer, error = yield from self._stages(new_files)
        except LLMError as e:
            error = str(e)
        except Exception:  # a bug: logged with its stack trace, reported without it
            log.exception("request %s failed", self.request_id)
            error = "Internal error while answering; the server log has the details."
        finally:
            self.timings["total"] = time.perf_counter() - started
        yield Done(answer=answer, error=error, trace=self._finish_trace(answer, error))

    def _stages(self, new_files: list[Path]):
        s = self.p.settings
        # 1. plan
        yield StageStarted("plan")
        with self._timed("plan"):
            available = self.workspace.files()
            infos = [
                FileInfo(kind_of_file(path) or "file", name, new=path in new_files)
                for name, path in available.items()
            ]
            # rejected plans are shown as they happen
            outcome = yield from plan_steps(
                self.llm,
                self.request,
                files=infos,
                history=self.history,
                shots=s.shots,
                max_retries=s.max_plan_retries,
                rules=FileRules(uploads=frozenset(available), allow_urls=s.allow_urls),
                history_tokens=s.history_tokens,
            )
        self.trace["plan_attempts"] = outcome.attempts
        self.trace["plan_problems"] = outcome.problems
        if outcome.plan is None:
            return "", f"I could not make a valid plan for this request. {outcome.error}"
        plan = outcome.plan
        self.trace["plan"] = plan.to_json()
        yield PlanReady(plan, outcome.attempts)
        if self.cancelled.is_set():  # Stop pressed while planning: no more LLM calls
            return "", "cancelled"

        if plan.tasks:
            # 2. select
            yield StageStarted("select")
            with self._timed("select"):
                choices = select_models(
                    self.llm,
                    plan,
                    self.p.catalog,
                    self.request,
                    runnable=self.p.endpoint.can_run,
                    k=s.top_k,
                    candidate_tokens=s.candidate_tokens,
                )
            self.trace["choices"] = {
                str(c.task_id): {
                    "model": c.model.id if c.model else None,
                    "reason": c.reason,
                    "candidates": [m.id for m in c.candidates],
                    "substituted": c.substituted,
                }
                for c in choices.values()
            }
            for t in plan.tasks:
                c = choices[t.id]
                if c.model is not None:
                    yield ModelSelected(
                        t.id, t.task, c.model.id, c.reason, [m.id for m in c.candidates], c.substituted
                    )
            if self.cancelled.is_set():
                return "", "cancelled"

            # 3. execute
            yield StageStarted("execute")
            with self._timed("execute"):
                yield from execute_plan(
                    plan,
                    choices,
                    self.p.endpoint,
                    self.workspace,
                    self.workspace.run_dir(self.request_id),
                    self.records,
                    ExecutionSettings(
                        max_workers=s.max_workers,
                        task_timeout=s.task_timeout,
                        task_attempts=s.task_attempts,
                        fetch_url=self._fetch if s.allow_urls else None,
                    ),
                    self.cancelled,
                )
            if self.cancelled.is_set():
                return "", "cancelled"

        # 4. respond
        yield StageStarted("respond")
        with self._timed("respond"):
            records = [self.records[t.id] for t in plan.tasks]
            parts = []
            # The same history budget as planning: a long conversation must not overflow the context.
            history = trim_history(self.history, s.history_tokens)
            messages = answer_messages(self.request, records, self.workspace, history)
            for delta in self.llm.stream(messages, stage="respond"):
                if self.cancelled.is_set():
                    return "".join(parts), "cancelled"
                parts.append(delta)
                yield AnswerDelta(delta)
            invented = missing_files("".join(parts), self.workspace)
            if invented:
                note = f"\n\n(Note: {', '.join(invented)} named above does not exist; no such file was made.)"
                parts.append(note)
                yield AnswerDelta(note)
        return "".join(parts), None

    def _fetch(self, url: str, dest: Path) -> Path:
        import httpx

        try:
            return urlguard.fetch(url, dest, max_bytes=self.p.settings.url_max_bytes)
        except httpx.HTTPError as e:
            raise urlguard.URLRefused(f"fetching {url} failed: {type(e).__name__}") from None

    @contextmanager
    def _timed(self, stage: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[stage] = time.perf_counter() - t0

    def _finish_trace(self, answer: str, error: str | None) -> dict[str, Any]:
        calls = self.llm.calls
        self.trace.update(
            answer=answer,
            error=error,
            tasks=[r.to_json(self.workspace.root) for r in self.records.values()],
            timings={k: round(v, 4) for k, v in self.timings.items()},
            llm_calls=[{**asdict(c), "seconds": round(c.seconds, 4)} for c in calls],
            tokens={
                "prompt": sum(c.usage.prompt_tokens for c in calls),
                "completion": sum(c.usage.completion_tokens for c in calls),
            },
        )
        path = self.workspace.trace_path(self.request_id)
        path.write_text(json.dumps(self.trace, indent=1, default=str), encoding="utf-8")
        self.trace["trace_file"] = str(path)
        return self.trace
