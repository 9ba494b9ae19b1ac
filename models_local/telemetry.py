"""OpenTelemetry spans of the expert runtime and server, in the caller's trace (`traceparent`).

Off unless OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set, as for the controller
(hugginggpt/telemetry.py, which this package may not import): then spans are exported over OTLP/HTTP
by a background thread, and a collector that is down costs a call nothing. Off, `span` is a no-op.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

SERVICE = "hugginggpt-experts"
EXIT_WAIT_S = 2.0  # at exit, unsent spans get this long (a collector that is down holds nothing)
_lock = threading.Lock()
_state: dict[str, Any] = {}  # "tracer": Tracer | None, once read from the environment


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
    return t.start_as_current_span(name, attributes=dict(attributes or {}), start_time=start_time)


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
