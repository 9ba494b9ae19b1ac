"""OpenTelemetry spans of the expert runtime and server, in the caller's trace (`traceparent`).

Off unless OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set, as for the controller
(hugginggpt/observability/telemetry.py, which this package may not import): then spans are
exported over OTLP/HTTP by a background thread, and a collector that is down costs a call nothing.
Off, `span` is a no-op.
A call to the server is a SERVER span with its HTTP status (served); every span carries the
namespaced attributes of the job it is part of (labelled: `hugginggpt.expert.model`, the model id)
and the caller's hashed conversation id, from the W3C baggage it sent.
"""

from __future__ import annotations

import atexit
import contextvars
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

SERVICE = "hugginggpt-experts"
EXIT_WAIT_S = 2.0  # at exit, unsent spans get this long (a collector that is down holds nothing)
_lock = threading.Lock()
_state: dict[str, Any] = {}  # "tracer": Tracer | None, once read from the environment
CONVERSATION = "gen_ai.conversation.id"
_labels: contextvars.ContextVar[tuple[tuple[str, Any], ...]] = contextvars.ContextVar(
    "expert_labels", default=()
)


def _on() -> bool:
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return any(env.get(f"OTEL_EXPORTER_OTLP_{kind}ENDPOINT") for kind in ("", "TRACES_"))


def tracer() -> Any:
    """The tracer, or None when traces are off (decided once per process)."""
    if "tracer" not in _state:
        with _lock:
            if "tracer" not in _state:
                _state["tracer"] = _make() if _on() else None
    return _state["tracer"]


def _make() -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: SERVICE})
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    processor = BatchSpanProcessor(OTLPSpanExporter())
    provider.add_span_processor(processor)
    atexit.register(_shut_within, processor, EXIT_WAIT_S)
    _state["provider"] = provider
    return provider.get_tracer("models_local")


def _shut_within(processor: Any, seconds: float) -> None:
    """Send what is left, in a thread given `seconds`: the exporter alone would retry a collector
    that is down for its whole time-out (10 s) before the process could end."""
    sending = threading.Thread(target=processor.shutdown, daemon=True, name="otel-exit")
    sending.start()
    sending.join(seconds)


def configure() -> bool:
    """Read the OTEL_* variables again (tests); True when traces are on."""
    with _lock:
        provider = _state.pop("provider", None)
        _state.pop("tracer", None)
    if provider is not None:
        provider.shutdown()
    return tracer() is not None


def flush(timeout_s: float = 5.0) -> None:
    provider = _state.get("provider")
    if provider is not None:
        provider.force_flush(int(timeout_s * 1000))


def span(name: str, attributes: Mapping[str, Any] | None = None, *, start_time: int | None = None) -> Any:
    """A span under the current one, current while the block runs; a no-op when traces are off."""
    t = tracer()
    if t is None:
        return nullcontext()
    return t.start_as_current_span(name, attributes=_with_labels(attributes), start_time=start_time)


def _with_labels(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    from opentelemetry import baggage

    conversation = baggage.get_baggage(CONVERSATION)
    extra = {CONVERSATION: str(conversation)} if conversation else {}
    return {**dict(_labels.get()), **extra, **(attributes or {})}


@contextmanager
def labelled(attributes: Mapping[str, Any]) -> Iterator[None]:
    """Spans started in the block carry `attributes` too (a job's model id and task)."""
    token = _labels.set(tuple({**dict(_labels.get()), **attributes}.items()))
    try:
        yield
    finally:
        _labels.reset(token)


@contextmanager
def served(
    headers: Mapping[str, str], method: str, route: str, attributes: Mapping[str, Any]
) -> Iterator[Callable[[int], None]]:
    """One HTTP call as a SERVER span in the caller's trace; the block reports its status code."""
    t = tracer()
    if t is None:
        yield lambda status: None
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    with joined(headers), labelled(attributes):
        http = {"http.request.method": method, "http.route": route}
        with t.start_as_current_span(
            f"{method} {route}", kind=SpanKind.SERVER, attributes=_with_labels(http)
        ) as current:

            def answered(status: int) -> None:
                current.set_attribute("http.response.status_code", status)
                if status >= 500:  # a server span's error: its own failure, not the client's 4xx
                    current.set_attribute("error.type", str(status))
                    current.set_status(Status(StatusCode.ERROR))

            yield answered


def carrier() -> dict[str, str]:
    """The current span as W3C headers (`traceparent`), to cross a process with a Job."""
    if tracer() is None:
        return {}
    from opentelemetry.propagate import inject

    headers: dict[str, str] = {}
    inject(headers)
    return headers


@contextmanager
def joined(headers: Mapping[str, str]) -> Iterator[None]:
    """Spans started in the block are children of the span `headers` carry (a traceparent)."""
    if tracer() is None or not headers:
        yield
        return
    from opentelemetry import context
    from opentelemetry.propagate import extract

    token = context.attach(extract(dict(headers)))
    try:
        yield
    finally:
        context.detach(token)
