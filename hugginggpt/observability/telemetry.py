"""OpenTelemetry traces of requests, for the tools operators already run (Phoenix, Jaeger, Langfuse).

Off unless the standard variables name a collector: OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it
off again. The exporter reads the other OTEL_* variables itself (headers, time-out, service name).
Off, a run's events pass through untouched. On, spans are handed to a background thread that
exports them over OTLP/HTTP: a collector that is down or slow costs a request nothing (the queue
drops what it cannot send).

One trace per request, from an observer of the run's events and LLM calls (run_spans.RunTrace; the
pipeline knows nothing of it): a root span, a span per stage, a span per LLM call with the GenAI
semantic conventions' attributes (gen_ai.*) from the moment it starts, and a span per task attempt
(tool_span, endpoints/observed.py) with a CLIENT span for each call to the expert server
(client_span), whose context travels as `traceparent` and the hashed conversation id as W3C
baggage. Prompts, replies, tool arguments and results go on spans only when the operator sets
trace_content; keys never do.
"""

from __future__ import annotations

import atexit
import contextvars
import hashlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer


log = logging.getLogger(__name__)
SERVICE = "hugginggpt"
SCOPE = "hugginggpt"
NS = 1_000_000_000
CONVERSATION = "gen_ai.conversation.id"
EXIT_WAIT_S = 2.0  # at exit, unsent spans get this long (a collector that is down holds nothing)

_lock = threading.Lock()
_state: dict[str, Any] = {}  # "provider": TracerProvider | None, once read from the environment


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the OTEL_* variables ask for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return any(environ.get(f"OTEL_EXPORTER_OTLP_{kind}ENDPOINT") for kind in ("", "TRACES_"))


def provider_from_env(service: str) -> TracerProvider | None:
    """A tracer provider exporting over OTLP/HTTP in the background, or None when traces are off."""
    if not wanted(os.environ):
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over our default name
    resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service})
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    processor = BatchSpanProcessor(OTLPSpanExporter())
    provider.add_span_processor(processor)
    atexit.register(_shut_within, processor, EXIT_WAIT_S)
    return provider


def _shut_within(processor: Any, seconds: float) -> None:
    """Send what is left, in a thread given `seconds`: the exporter alone would retry a collector
    that is down for its whole time-out (10 s) before the process could end."""
    sending = threading.Thread(target=processor.shutdown, daemon=True, name="otel-exit")
    sending.start()
    sending.join(seconds)


def tracer() -> Tracer | None:
    """This process's tracer, or None when traces are off (decided once, from the environment)."""
    if "provider" not in _state:
        with _lock:
            if "provider" not in _state:
                _state["provider"] = provider_from_env(SERVICE)
    provider = _state["provider"]
    return provider.get_tracer(SCOPE) if provider is not None else None


def configure() -> bool:
    """Read the OTEL_* variables again (tests; a process whose environment changed); True when on."""
    shutdown()
    use(provider_from_env(SERVICE))
    return _state["provider"] is not None


def use(provider: TracerProvider | None) -> None:
    """Send spans to `provider` from now on (None: traces off); benchmarks switch between several."""
    with _lock:
        _state["provider"] = provider


def flush(timeout_s: float = 5.0) -> None:
    provider = _state.get("provider")
    if provider is not None:
        provider.force_flush(int(timeout_s * 1000))


def shutdown() -> None:
    with _lock:
        provider = _state.pop("provider", None)
    if provider is not None:
        provider.shutdown()


def inject(headers: dict[str, str]) -> dict[str, str]:
    """`headers` with the current span's `traceparent` (and the run's hashed conversation id as
    `baggage`) added; nothing when traces are off."""
    if _state.get("provider") is not None:
        from opentelemetry import baggage
        from opentelemetry.propagate import inject as put

        run = running.get()
        put(headers, context=baggage.set_baggage(CONVERSATION, run.conversation) if run else None)
    return headers


def exemplar() -> dict[str, str] | None:
    """The current trace's id as a Prometheus exemplar; None when traces are off or none is current."""
    if _state.get("provider") is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return {"trace_id": format(context.trace_id, "032x")} if context.is_valid else None


def conversation_id(workspace_name: str) -> str:
    """A conversation's id for spans: a hash of its workspace's name, never the name (a browser's key)."""
    return hashlib.sha256(f"hugginggpt.conversation:{workspace_name}".encode()).hexdigest()[:32]


# The run whose stage is working in this context (RunTrace.working): task threads copy it.
running: contextvars.ContextVar[Any] = contextvars.ContextVar("hugginggpt_run_trace", default=None)


@contextmanager
def tool_span(task: str, call_id: str) -> Iterator[tuple[Span | None, bool]]:
    """A task attempt's `execute_tool` span, current in the block, and whether content may go on it."""
    t = tracer()
    if t is None:
        yield None, False
        return
    run = running.get()
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": task,
        "gen_ai.tool.type": "extension",
        "gen_ai.tool.call.id": call_id,
    }
    if run is not None:
        attributes[CONVERSATION] = run.conversation
    with t.start_as_current_span(
        f"execute_tool {task}", attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span, bool(run is not None and run.settings.trace_content)
        except Exception as exc:  # a model's failure has its status already (observed.py); a bug not
            from opentelemetry.trace import Status, StatusCode

            status = getattr(span, "status", None)  # the SDK's span has one
            if status is None or status.status_code is StatusCode.UNSET:
                span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            raise


@contextmanager
def client_span(method: str, url: str) -> Iterator[Callable[[int], None]]:
    """An HTTP call to the expert server as a CLIENT span, current in the block (its traceparent is
    what inject sends); the block reports the status code it got with the callable it is given."""
    t = tracer()
    if t is None:
        yield lambda status: None
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    parts = urlsplit(url)
    attributes: dict[str, Any] = {
        "http.request.method": method,
        "server.address": parts.hostname or "",
        "server.port": parts.port or (443 if parts.scheme == "https" else 80),
        "url.full": f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}",
    }
    run = running.get()
    if run is not None:
        attributes[CONVERSATION] = run.conversation
    with t.start_as_current_span(
        method,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:

        def answered(status: int) -> None:
            span.set_attribute("http.response.status_code", status)
            if status >= 400:
                span.set_attribute("error.type", str(status))
                span.set_status(Status(StatusCode.ERROR))

        try:
            yield answered
        except Exception as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
            raise
