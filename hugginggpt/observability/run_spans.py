"""The spans of one run, as the OpenTelemetry GenAI conventions name them (gen-ai-agent-spans.md).

`invoke_agent hugginggpt` is the root (the controller is one agent whose tools are the expert
models); planning is a `plan hugginggpt` span (operation `plan`), the other stages
`hugginggpt.<stage>`; each LLM call a CLIENT span `chat <model>` under its stage, started when the
call starts and ended when it ends; task attempts (telemetry.tool_span) and the expert server's
spans sit under the stage that ran them. Every span carries the hashed conversation id. Content
(trace_content) is written in the conventions' `parts` shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from hugginggpt.observability.observers import Observer
from hugginggpt.observability.telemetry import CONVERSATION, NS, SERVICE, running, tracer
from hugginggpt.run.events import Done, Event, PlanReady, Stage, StageStarted
from hugginggpt.run.records import TaskStatus

if TYPE_CHECKING:
    from collections.abc import Iterator

    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

    from hugginggpt.config import Settings

# gen_ai.provider.name by the LLM's host: the conventions' well-known values; any other
# OpenAI-compatible server (vLLM, TGI, Ollama) speaks the `openai` flavour.
_PROVIDERS = {
    "api.openai.com": "openai",
    "openai.azure.com": "azure.ai.openai",
    "api.groq.com": "groq",
    "api.deepseek.com": "deepseek",
    "api.mistral.ai": "mistral_ai",
    "api.x.ai": "x_ai",
    "api.perplexity.ai": "perplexity",
    "generativelanguage.googleapis.com": "gcp.gemini",
}


def provider_of(llm: Any) -> tuple[str, str | None, int | None]:
    """(gen_ai.provider.name, server.address, server.port) of the controller LLM."""
    base_url = getattr(llm, "base_url", None)
    if not base_url:
        return "transformers", None, None  # the local model (llm_local)
    parts = urlsplit(str(base_url))
    host = parts.hostname or ""
    name = next((v for k, v in _PROVIDERS.items() if host == k or host.endswith("." + k)), "openai")
    return name, host, parts.port or (443 if parts.scheme == "https" else 80)


def parts_messages(messages: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI-style chat messages in the conventions' shape: {"role", "parts": [{"type", ...}]}."""
    shaped = []
    for m in messages:
        content = m.get("content")
        pieces = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        parts = []
        for p in pieces:
            if isinstance(p, Mapping) and p.get("type") == "text":
                parts.append({"type": "text", "content": str(p.get("text", ""))})
            elif isinstance(p, Mapping):  # an image or audio part: its kind, not its bytes
                parts.append({"type": "blob", "modality": str(p.get("type", "file")).split("_")[0]})
        shaped.append({"role": str(m.get("role", "user")), "parts": parts})
    return shaped


class RunTrace(Observer):
    def __init__(self, t: Tracer, settings: Settings, llm: Any, conversation: str) -> None:
        from opentelemetry import trace

        self.t, self.settings, self.conversation = t, settings, conversation
        self.model = str(getattr(llm, "model", "") or llm.describe())
        self.provider, self.host, self.port = provider_of(llm)
        self._trace = trace
        self.root = t.start_span(
            f"invoke_agent {SERVICE}",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": SERVICE,
                "gen_ai.provider.name": self.provider,
                "gen_ai.request.model": self.model,
                CONVERSATION: conversation,
            },
        )
        self.clock = StageClock()
        self.stages: dict[str, Span] = {}
        self.context: Context = trace.set_span_in_context(self.root)
        self.llm_spans: dict[int, Span] = {}
        self.plan_rounds = 0

    @contextmanager
    def working(self) -> Iterator[None]:
        """The current stage's span is current while the stage works: what it starts (task
        attempts, calls to the expert server) joins the trace under it."""
        from opentelemetry import context

        token = context.attach(self.context)
        marked = running.set(self)
        try:
            yield
        finally:
            running.reset(marked)
            context.detach(token)

    def seen(self, event: Event) -> None:
        ended, started = self.clock.seen(event)
        if isinstance(event, Done):
            self._done(event, ended)
        for stage in ended:
            self.stages[stage].end()
        if started is not None:
            self._stage_started(started)

    def _stage_started(self, stage: str) -> None:
        if stage == Stage.PLAN:
            name, operation = (
                f"plan {SERVICE}",
                {"gen_ai.operation.name": "plan", "gen_ai.agent.name": SERVICE},
            )
        else:
            name, operation = f"hugginggpt.{stage}", {}
        span = self.t.start_span(
            name,
            context=self._trace.set_span_in_context(self.root),
            attributes={"hugginggpt.stage": stage, CONVERSATION: self.conversation, **operation},
        )
        self.stages[stage] = span
        self.context = self._trace.set_span_in_context(span)

    def _done(self, done: Done, ended: list[str]) -> None:
        from opentelemetry.trace import Status, StatusCode

        root = self.root
        root.set_attribute("hugginggpt.request_id", done.request_id)
        root.set_attribute("hugginggpt.outcome", str(done.outcome))
        root.set_attribute("gen_ai.usage.input_tokens", done.usage.prompt_tokens)
        root.set_attribute("gen_ai.usage.output_tokens", done.usage.completion_tokens)
        if done.usage.cost is not None:
            root.set_attribute("hugginggpt.cost", float(done.usage.cost))
        if self.settings.trace_content:
            root.set_attribute("input.value", done.request)
            root.set_attribute("output.value", done.answer)
            answer = [{"role": "assistant", "parts": [{"type": "text", "content": done.answer}]}]
            root.set_attribute("gen_ai.output.messages", json.dumps(answer, ensure_ascii=False))
        error_type, message = _failure(done)
        if error_type is not None:
            # an error's message may quote the request's words: on spans only with trace content
            status = Status(StatusCode.ERROR, message if self.settings.trace_content else error_type)
            root.set_attribute("error.type", error_type)
            root.set_status(status)
            for stage in ended if done.error_kind is not None else ():  # the stage it failed in
                self.stages[stage].set_status(status)

    def llm_started(self, call: Any) -> None:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
            "hugginggpt.stage": call.stage,
            CONVERSATION: self.conversation,
        }
        if self.host:
            attributes["server.address"], attributes["server.port"] = self.host, self.port
        if call.stage == Stage.PLAN:
            attributes["hugginggpt.correction_round"] = self.plan_rounds
            self.plan_rounds += 1
        parent = self.stages.get(call.stage, self.root)
        from opentelemetry.trace import SpanKind

        self.llm_spans[id(call)] = self.t.start_span(
            f"chat {self.model}",
            context=self._trace.set_span_in_context(parent),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=int(call.started * NS),
        )

    def llm_ended(self, call: Any) -> None:
        from opentelemetry.trace import Status, StatusCode

        span = self.llm_spans.pop(id(call), None)
        if span is None:
            return
        span.set_attribute("gen_ai.usage.input_tokens", call.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", call.usage.completion_tokens)
        if call.response_model:
            span.set_attribute("gen_ai.response.model", call.response_model)
        reason = call.finish_reason or ("error" if call.error else "length" if call.cut else "stop")
        span.set_attribute("gen_ai.response.finish_reasons", [reason])
        if call.first_piece_seconds is not None:
            span.set_attribute("hugginggpt.time_to_first_token_s", round(call.first_piece_seconds, 4))
        if call.cut:
            span.set_attribute("hugginggpt.cut", str(call.cut))
        if self.settings.trace_content:
            output = [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": call.reply}],
                    "finish_reason": reason,
                }
            ]
            span.set_attribute(
                "gen_ai.input.messages", json.dumps(parts_messages(call.messages), ensure_ascii=False)
            )
            span.set_attribute("gen_ai.output.messages", json.dumps(output, ensure_ascii=False))
        if call.error:
            span.set_attribute("error.type", "llm")
            span.set_status(
                Status(StatusCode.ERROR, str(call.error)[:500] if self.settings.trace_content else "llm")
            )
        span.end(end_time=int((call.started + call.seconds) * NS))

    def closed(self) -> None:
        """At the end of the run, or when its listener stopped listening before Done."""
        for stage in self.clock.close():
            self.stages[stage].end()
        for span in self.llm_spans.values():  # a call still running when the listener left
            span.end()
        self.root.end()


def _failure(done: Done) -> tuple[str | None, str]:
    """(error.type, message) of a run that failed, or whose every task failed; (None, "") otherwise."""
    if done.error_kind is not None:
        return str(done.error_kind), done.error or ""
    statuses = {r.status for r in done.records}
    if TaskStatus.FAILED in statuses and statuses <= {TaskStatus.FAILED, TaskStatus.SKIPPED}:
        return "tasks_failed", f"no task of {len(done.records)} succeeded"
    return None, ""


class StageClock:
    """Which stages are under way, from the events: a stage ends when the next one starts, except
    planning, which ends at PlanReady (tasks may start while the plan is still written); all end at
    Done. A stage that fails ends (and is timed) at the Done that reports the failure."""

    def __init__(self) -> None:
        self.open: list[str] = []

    def seen(self, event: Event) -> tuple[list[str], str | None]:
        """(the stages that ended at `event`, the stage it started)."""
        if isinstance(event, StageStarted):
            ended = self._end(keep=Stage.PLAN)
            self.open.append(str(event.stage))
            return ended, str(event.stage)
        if isinstance(event, PlanReady) and Stage.PLAN in self.open:
            self.open.remove(Stage.PLAN)
            return [str(Stage.PLAN)], None
        if isinstance(event, Done):
            return self._end(), None
        return [], None

    def close(self) -> list[str]:
        return self._end()

    def _end(self, keep: str | None = None) -> list[str]:
        ended = [s for s in self.open if s != keep]
        self.open = [s for s in self.open if s == keep]
        return ended


def observers(settings: Settings, llm: Any, conversation: str) -> list[Observer]:
    """The observers that trace one run (none while traces are off). `conversation`: conversation_id."""
    t = tracer()
    if t is None:
        return []
    return [RunTrace(t, settings, llm, conversation)]
