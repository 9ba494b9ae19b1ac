"""Prometheus metrics of this process: what the app shows at /metrics (HUGGINGGPT_METRICS=1).

Counted by an observer of each run's events and LLM calls (RunMetrics), from every task attempt
(endpoints/observed.py), the result cache and the run slots; the gauges ask their owners when
scraped (watch). Labels take only values from fixed sets (outcomes, stages, task types, backend
names), and every value of a counter's labels is there at 0 from the start: the first error after a
restart shows in increase() and rate(). A failed request and a failed task are counted apart.
Histograms carry the trace id as an exemplar when traces are on and the scrape asks for OpenMetrics.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import (
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)
from prometheus_client.exposition import choose_encoder

from hugginggpt.observability import telemetry
from hugginggpt.observability.observers import Observer
from hugginggpt.run.events import (
    Done,
    ErrorKind,
    Event,
    Outcome,
    Stage,
    StageStarted,
    TaskFailed,
    TaskFinished,
    TaskSkipped,
)
from hugginggpt.tasks import TASKS
from hugginggpt.version import __version__

REGISTRY = R = CollectorRegistry()
R.register(PROCESS_COLLECTOR)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
R.register(PLATFORM_COLLECTOR)  # python_info
# Planning calls take 2-60 s, models 0.05 s to minutes: steps fine enough that a 12 s call reads ~12 s.
_SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900)
_FIRST_TOKEN = (0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120)
TASK_OUTCOMES = ("done", "failed", "skipped")
LLM_STAGES = (Stage.PLAN, Stage.SELECT, Stage.RESPOND)

BUILD = Gauge("hugginggpt_build_info", "This build: version and Python", ["version", "python"], registry=R)
REQUESTS = Counter("hugginggpt_requests", "Requests run, by outcome", ["outcome"], registry=R)
ERRORS = Counter("hugginggpt_errors", "Failed requests, by kind", ["kind"], registry=R)
TASKS_RUN = Counter(
    "hugginggpt_tasks",
    "Tasks of a plan by how they ended (once each, attempts or none): done, failed, skipped",
    ["task", "outcome"],
    registry=R,
)
STAGE_SECONDS = Histogram(
    "hugginggpt_stage_seconds",
    "Time in each stage of a request, failed stages included",
    ["stage"],
    buckets=_SECONDS,
    registry=R,
)
TASK_SECONDS = Histogram(
    "hugginggpt_task_seconds",
    "Time of one task attempt, by task type and where it ran (local, hosted, remote, cache)",
    ["task", "where", "outcome"],
    buckets=_SECONDS,
    registry=R,
)
LLM_CALL_SECONDS = Histogram(
    "hugginggpt_llm_call_seconds",
    "Time of one LLM call, by stage and outcome (done, cut, error)",
    ["stage", "outcome"],
    buckets=_SECONDS,
    registry=R,
)
LLM_FIRST_TOKEN = Histogram(
    "hugginggpt_llm_time_to_first_token_seconds",
    "Time from an LLM call's start to its reply's first text, by stage",
    ["stage"],
    buckets=_FIRST_TOKEN,
    registry=R,
)
LLM_TOKENS = Counter(
    "hugginggpt_llm_tokens", "LLM tokens by stage and direction", ["stage", "direction"], registry=R
)
LLM_COST = Counter("hugginggpt_llm_cost", "Cost of the LLM tokens at the operator's prices", registry=R)
CACHE_LOOKUPS = Counter(
    "hugginggpt_result_cache_lookups", "Result cache lookups, by result (hit, miss)", ["result"], registry=R
)
SLOT_WAIT = Histogram(
    "hugginggpt_slot_wait_seconds", "Time a request waited for a run slot", buckets=_SECONDS, registry=R
)
SLOTS_IN_USE = Gauge("hugginggpt_slots_in_use", "Run slots in use", registry=R)
CONVERSATIONS = Gauge("hugginggpt_conversations_open", "Conversations open", registry=R)
MODELS_RESIDENT = Gauge("hugginggpt_models_resident", "Models loaded in this process", registry=R)
MODELS_BYTES = Gauge("hugginggpt_models_resident_bytes", "Bytes of the models loaded here", registry=R)


def _at_zero() -> None:
    """Every label value of every counter (and of the stage and LLM histograms), present from the
    start: a series that appears with its first observation hides that observation from rate()."""
    for stage in Stage:
        STAGE_SECONDS.labels(str(stage))
    for stage in LLM_STAGES:
        LLM_FIRST_TOKEN.labels(str(stage))
        for call_outcome in ("done", "cut", "error"):
            LLM_CALL_SECONDS.labels(str(stage), call_outcome)
    for outcome in Outcome:
        REQUESTS.labels(str(outcome))
    for kind in ErrorKind:
        ERRORS.labels(str(kind))
    for task in TASKS:
        for task_outcome in TASK_OUTCOMES:
            TASKS_RUN.labels(task, task_outcome)
    for stage in LLM_STAGES:
        for direction in ("input", "output"):
            LLM_TOKENS.labels(str(stage), direction)
    for result in ("hit", "miss"):
        CACHE_LOOKUPS.labels(result)


_at_zero()


class RunMetrics(Observer):
    """One run's metrics, counted as its events and LLM calls come."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}  # when each stage began, by its StageStarted
        self.exemplar: dict[str, str] | None = None

    def seen(self, event: Event) -> None:
        if self.exemplar is None and isinstance(event, StageStarted | Done):
            self.exemplar = telemetry.exemplar()  # the run's trace, when traced
        if isinstance(event, StageStarted):
            self.started.setdefault(str(event.stage), time.perf_counter())
        elif isinstance(event, TaskFinished):
            TASKS_RUN.labels(event.task, "done").inc()
        elif isinstance(event, TaskFailed) and event.final:
            TASKS_RUN.labels(event.task, "failed").inc()
        elif isinstance(event, TaskSkipped):
            TASKS_RUN.labels(event.task, "skipped").inc()
        elif isinstance(event, Done):
            # The run's own timings; a stage it did not time (it failed there) from its start to now
            timings = {s: time.perf_counter() - t for s, t in self.started.items()} | dict(
                done_timings(event)
            )
            for stage, seconds in timings.items():
                STAGE_SECONDS.labels(stage).observe(seconds, self.exemplar)
            request_done(event)

    def llm_ended(self, call: Any) -> None:
        outcome = "error" if call.error else "cut" if call.cut else "done"
        LLM_CALL_SECONDS.labels(call.stage, outcome).observe(call.seconds, self.exemplar)
        if call.first_piece_seconds is not None:
            LLM_FIRST_TOKEN.labels(call.stage).observe(call.first_piece_seconds, self.exemplar)


def done_timings(done: Done) -> dict[str, float]:
    return {stage: seconds for stage, seconds in done.timings.items() if stage != "total"}


def request_done(done: Done) -> None:
    REQUESTS.labels(str(done.outcome)).inc()
    if done.error_kind is not None:
        ERRORS.labels(str(done.error_kind)).inc()
    for stage, spent in done.usage.by_stage.items():
        LLM_TOKENS.labels(stage, "input").inc(spent["input_tokens"])
        LLM_TOKENS.labels(stage, "output").inc(spent["output_tokens"])
    if done.usage.cost:
        LLM_COST.inc(done.usage.cost)


def task_ran(task: str, where: str, outcome: str, seconds: float) -> None:
    TASK_SECONDS.labels(task, where, outcome).observe(seconds, telemetry.exemplar())


def cache_lookup(hit: bool) -> None:
    CACHE_LOOKUPS.labels("hit" if hit else "miss").inc()


def slot_waited(seconds: float) -> None:
    SLOT_WAIT.observe(seconds)


def watch(
    *, slots_in_use: Callable[[], float] | None = None, conversations_open: Callable[[], float] | None = None
) -> None:
    """The app's gauges, read from their owners when scraped (the latest app to name each: the host
    its slots, the chat engine its conversations)."""
    if slots_in_use is not None:
        SLOTS_IN_USE.set_function(slots_in_use)
    if conversations_open is not None:
        CONVERSATIONS.set_function(conversations_open)


def _resident() -> tuple[int, int]:
    from hugginggpt.endpoints.local import resident

    return resident()


MODELS_RESIDENT.set_function(lambda: _resident()[0])
MODELS_BYTES.set_function(lambda: _resident()[1])


def render(accept: str = "") -> tuple[bytes, str]:
    """The exposition the scraper asked for (`accept`: its Accept header), and its content type:
    OpenMetrics (with exemplars) when asked for, else the classic text format."""
    BUILD.labels(__version__, platform.python_version()).set(1)
    encoder, content_type = choose_encoder(accept)
    return encoder(REGISTRY), content_type
