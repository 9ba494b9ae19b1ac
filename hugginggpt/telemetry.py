"""OpenTelemetry traces of requests, for the tools operators already run (Phoenix, Jaeger, Langfuse).

Off unless the standard variables name a collector: OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it
off again. The exporter reads the other OTEL_* variables itself (headers, time-out, service name).
Off, a run's events pass through untouched. On, spans are handed to a background thread that
exports them over OTLP/HTTP: a collector that is down or slow costs a request nothing (the queue
drops what it cannot send).

One trace per request, built from the run's own events and trace (the pipeline knows nothing of
it): a root span, a span per stage, a span per LLM call with the GenAI semantic conventions'
attributes (gen_ai.*), and a span per task attempt (endpoints/observed.py), whose context travels
to the expert server as `traceparent` (inject). Prompts and replies go on spans only when the
operator sets trace_content; keys never do.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .events import Done, Event, PlanReady, Stage, StageStarted

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

    from .config import Settings

log = logging.getLogger(__name__)
SERVICE = "hugginggpt"
SCOPE = "hugginggpt"
NS = 1_000_000_000
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
    """`headers` with the current span's `traceparent` added (nothing when traces are off)."""
    if _state.get("provider") is not None:
        from opentelemetry.propagate import inject as put

        put(headers)
    return headers


def traced(events: Iterator[Event], settings: Settings, model: str) -> Iterator[Event]:
    """The run's events, unchanged; while traces are on, also its spans. `model`: the LLM's name."""
    t = tracer()
    if t is None:
        return events
    return _traced(events, _RunSpans(t, settings, model))


def _traced(events: Iterator[Event], spans: _RunSpans) -> Iterator[Event]:
    from opentelemetry import context

    try:
        while True:
            # The stage's span is current while the stage works: what it starts (task attempts,
            # calls to the expert server) joins the trace under it.
            token = context.attach(spans.context)
            try:
                event = next(events)
            except StopIteration:
                return
            finally:
                context.detach(token)
            spans.seen(event)
            yield event
    finally:
        spans.close()
        getattr(events, "close", lambda: None)()  # a listener that stops early stops the run


class _RunSpans:
    """The spans of one run: the root, the current stage's, and the LLM calls' at the end."""

    def __init__(self, t: Tracer, settings: Settings, model: str) -> None:
        from opentelemetry import trace

        self.t, self.settings, self.model = t, settings, model
        self.root = t.start_span(
            f"invoke_agent {SERVICE}",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": SERVICE},
        )
        self.stages: dict[str, Span] = {}
        self.open: dict[str, Span] = {}  # the stages whose spans have not ended yet
        self.context: Context = trace.set_span_in_context(self.root)
        self._trace = trace

    def seen(self, event: Event) -> None:
        if isinstance(event, StageStarted):
            # A stage ends when the next begins, except planning: tasks may start while the plan is
            # still being written (streaming execution), so its span ends when the plan is ready.
            self._end_stages(keep=Stage.PLAN)
            stage = self.t.start_span(f"hugginggpt.{event.stage}", context=self.context_of(self.root))
            stage.set_attribute("hugginggpt.stage", str(event.stage))
            self.stages[str(event.stage)] = self.open[str(event.stage)] = stage
            self.context = self.context_of(stage)
        elif isinstance(event, PlanReady) and Stage.PLAN in self.open:
            self.open.pop(Stage.PLAN).end()
        elif isinstance(event, Done):
            self._done(event)

    def context_of(self, span: Span) -> Context:
        return self._trace.set_span_in_context(span)

    def _end_stages(self, keep: str | None = None) -> None:
        for name in [name for name in self.open if name != keep]:
            self.open.pop(name).end()

    def _done(self, done: Done) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._end_stages()
        trace = done.trace
        root = self.root
        root.set_attribute("hugginggpt.request_id", done.request_id)
        root.set_attribute("hugginggpt.outcome", str(done.outcome))
        root.set_attribute("gen_ai.request.model", self.model)
        root.set_attribute("gen_ai.usage.input_tokens", done.usage.prompt_tokens)
        root.set_attribute("gen_ai.usage.output_tokens", done.usage.completion_tokens)
        if done.usage.cost is not None:
            root.set_attribute("hugginggpt.cost", float(done.usage.cost))
        if self.settings.trace_content:
            root.set_attribute("input.value", done.request)
            root.set_attribute("output.value", done.answer)
        if done.error_kind is not None:
            root.set_attribute("error.type", str(done.error_kind))
            why = (done.error or "") if self.settings.trace_content else str(done.error_kind)  # no words
            root.set_status(Status(StatusCode.ERROR, why))
        rounds = 0
        for call in trace.get("llm_calls", []):
            stage = str(call.get("stage"))
            self._llm_span(call, rounds if stage == "plan" else None)
            rounds += stage == "plan"

    def _llm_span(self, call: Mapping[str, Any], correction_round: int | None) -> None:
        from opentelemetry.trace import Status, StatusCode

        stage = str(call.get("stage"))
        start = float(call.get("started") or 0)
        usage = call.get("usage") or {}
        parent = self.stages.get(stage, self.root)
        span = self.t.start_span(
            f"chat {self.model}", context=self.context_of(parent), start_time=int(start * NS)
        )
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.request.model", self.model)
        span.set_attribute("gen_ai.usage.input_tokens", int(usage.get("prompt_tokens") or 0))
        span.set_attribute("gen_ai.usage.output_tokens", int(usage.get("completion_tokens") or 0))
        span.set_attribute("hugginggpt.stage", stage)
        if correction_round is not None:
            span.set_attribute("hugginggpt.correction_round", correction_round)
        if call.get("cut"):
            span.set_attribute("hugginggpt.cut", str(call["cut"]))
        if self.settings.trace_content:
            reply = [{"role": "assistant", "content": call.get("reply", "")}]
            span.set_attribute(
                "gen_ai.input.messages", json.dumps(call.get("messages", []), ensure_ascii=False)
            )
            span.set_attribute("gen_ai.output.messages", json.dumps(reply, ensure_ascii=False))
        if call.get("error"):
            span.set_attribute("error.type", "llm")
            span.set_status(
                Status(StatusCode.ERROR, str(call["error"]) if self.settings.trace_content else "llm")
            )
        span.end(end_time=int((start + float(call.get("seconds") or 0)) * NS))

    def close(self) -> None:
        """At the end of the run, or when its listener stopped listening before Done."""
        self._end_stages()
        self.root.end()
