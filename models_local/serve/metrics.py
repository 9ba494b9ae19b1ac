"""Prometheus metrics of the expert server, at its GET /metrics: calls by task and status, their
time and batch sizes, calls in flight, the models resident (and their bytes, where the backend
knows them), and the process (process_*: CPU, memory, open files)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from prometheus_client import PROCESS_COLLECTOR, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response

# Model calls take 0.05 s to minutes: steps fine enough that a 12 s call reads ~12 s, not 20 s.
_SECONDS = (0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600)
_SIZES = (1, 2, 4, 8, 16, 32)
BATCH_HEADER = "x-batch-size"  # an answer's: how many calls its model ran together (0: not known)


class ServerMetrics:
    """One registry per app: two apps in a process (tests) count apart."""

    def __init__(self, backend: Any, tasks: Iterable[str] = ()) -> None:
        """`tasks`: the task labels there at 0 from the start (with 200, 500 and 503), so that the
        first failure after a start shows in rate() and increase()."""
        r = self.registry = CollectorRegistry()
        r.register(PROCESS_COLLECTOR)
        self.calls = Counter(
            "hugginggpt_expert_calls", "Calls by task and HTTP status", ["task", "status"], registry=r
        )
        self.seconds = Histogram(
            "hugginggpt_expert_call_seconds",
            "Time of a call, by task",
            ["task"],
            buckets=_SECONDS,
            registry=r,
        )
        for task in tasks:
            self.seconds.labels(task)
            for status in ("200", "500", "503"):
                self.calls.labels(task, status)
        self.batch_size = Histogram(
            "hugginggpt_expert_batch_size",
            "Calls a model ran together with each answered call, by task",
            ["task"],
            buckets=_SIZES,
            registry=r,
        )
        self.in_flight = Gauge("hugginggpt_expert_calls_in_flight", "Calls being answered", registry=r)
        resident = Gauge(
            "hugginggpt_expert_models_resident", "Models resident on the server's runners", registry=r
        )
        resident.set_function(lambda: len(backend.resident()))
        runtime = getattr(backend, "runtime", None)  # the in-process backend: its runtime's memory
        if runtime is not None:
            used = Gauge(
                "hugginggpt_expert_models_resident_bytes", "Bytes of the resident models", registry=r
            )
            used.set_function(lambda: runtime.used)

    async def timed(self, task: str, answer: Callable[[], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        status = 500
        with self.in_flight.track_inprogress():
            try:
                response = await answer()
                status = response.status_code
                if int(response.headers.get(BATCH_HEADER, "0")) > 0:
                    self.batch_size.labels(task).observe(int(response.headers[BATCH_HEADER]))
                return response
            finally:
                self.calls.labels(task, str(status)).inc()
                self.seconds.labels(task).observe(time.perf_counter() - started)

    async def scrape(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)
