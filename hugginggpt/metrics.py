"""Prometheus metrics of this process: what the app shows at /metrics (HUGGINGGPT_METRICS=1).

Counted from each run's events and Done (counted), from every task attempt (endpoints/observed.py),
the result cache and the run slots; the gauges ask their owners when scraped (watch). Labels take
only values from fixed sets (outcomes, stages, task types, backend names): the series stay few.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from .events import Done, Event

REGISTRY = R = CollectorRegistry()
_SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)

REQUESTS = Counter("hugginggpt_requests", "Requests run, by outcome", ["outcome"], registry=R)
ERRORS = Counter(
    "hugginggpt_errors",
    "Failed requests by kind; failed task attempts: task",
    ["kind"],
    registry=R,
)
STAGE_SECONDS = Histogram(
    "hugginggpt_stage_seconds", "Time in each stage of a request", ["stage"], buckets=_SECONDS, registry=R
)
TASK_SECONDS = Histogram(
    "hugginggpt_task_seconds",
    "Time of one task attempt, by task type and where it ran (local, hosted, remote, cache)",
    ["task", "where", "outcome"],
    buckets=_SECONDS,
    registry=R,
)
LLM_TOKENS = Counter(
    "hugginggpt_llm_tokens",
    "LLM tokens by stage and direction",
    ["stage", "direction"],
    registry=R,
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


def counted(events: Iterator[Event]) -> Iterator[Event]:
    """The run's events, unchanged; its Done is counted."""
    try:
        for event in events:
            if isinstance(event, Done):
                request_done(event)
            yield event
    finally:  # a listener that stops early stops the run (execute.py)
        getattr(events, "close", lambda: None)()


def request_done(done: Done) -> None:
    REQUESTS.labels(str(done.outcome)).inc()
    if done.error_kind is not None:
        ERRORS.labels(str(done.error_kind)).inc()
    for stage, seconds in done.timings.items():
        if stage != "total":
            STAGE_SECONDS.labels(stage).observe(seconds)
    for stage, spent in done.usage.by_stage.items():
        LLM_TOKENS.labels(stage, "input").inc(spent["input_tokens"])
        LLM_TOKENS.labels(stage, "output").inc(spent["output_tokens"])
    if done.usage.cost:
        LLM_COST.inc(done.usage.cost)


def task_ran(task: str, where: str, outcome: str, seconds: float) -> None:
    TASK_SECONDS.labels(task, where, outcome).observe(seconds)
    if outcome == "failed":
        ERRORS.labels("task").inc()


def cache_lookup(hit: bool) -> None:
    CACHE_LOOKUPS.labels("hit" if hit else "miss").inc()


def slot_waited(seconds: float) -> None:
    SLOT_WAIT.observe(seconds)


def watch(*, slots_in_use: Callable[[], float], conversations_open: Callable[[], float]) -> None:
    """The app's gauges, read from their owners when scraped (the latest app to call this)."""
    SLOTS_IN_USE.set_function(slots_in_use)
    CONVERSATIONS.set_function(conversations_open)


def _resident() -> tuple[int, int]:
    from .endpoints.local import resident

    return resident()


MODELS_RESIDENT.set_function(lambda: _resident()[0])
MODELS_BYTES.set_function(lambda: _resident()[1])


def render() -> bytes:
    """The text exposition format (Content-Type: prometheus_client.CONTENT_TYPE_LATEST)."""
    return generate_latest(REGISTRY)
