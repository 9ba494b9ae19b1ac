"""Watching a run without owning it: observers over one event stream.

The shape of OpenTelemetry's SpanProcessor: `observed(events, *observers)` passes a run's events on
unchanged and shows each to every observer (metrics, traces, a budget); no observer wraps another or
steers the run. A listener that stops early still stops the run. An observer may also watch the run's
LLM calls as they start and end (`llm.LLM.watchers`), so that a call is seen while it is under way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, nullcontext
from typing import Any

from hugginggpt.run.events import Done, Event


class Observer:
    """Override what you need; every hook is a no-op here."""

    def working(self) -> AbstractContextManager[Any]:
        """Entered while the run works toward its next event and while observers see it (a trace
        makes its current span current here, so that what the run starts joins the trace)."""
        return nullcontext()

    def seen(self, event: Event) -> None:
        """Each event, Done included, before the listener gets it."""

    def closed(self) -> None:
        """Once, after Done or when the listener stopped listening before it."""

    def llm_started(self, call: Any) -> None:
        """An LLM call (llm.LLMCall) began: from the thread that makes it."""

    def llm_ended(self, call: Any) -> None:
        """That call ended (its reply, time, usage, error or cut are filled in)."""


class OnDone(Observer):
    def __init__(self, action: Callable[[Done], None]) -> None:
        self.action = action

    def seen(self, event: Event) -> None:
        if isinstance(event, Done):
            self.action(event)


def observed(
    events: Iterator[Event], *observers: Observer, on_done: Callable[[Done], None] | None = None
) -> Iterator[Event]:
    """The run's events, unchanged, each shown to `observers` (and its Done to `on_done`)."""
    watchers = [*observers, *([OnDone(on_done)] if on_done is not None else [])]
    if not watchers:
        return events
    return _observed(events, watchers)


def _observed(events: Iterator[Event], watchers: list[Observer]) -> Iterator[Event]:
    # Only observers that override `working` are entered: a context per event costs microseconds.
    working = [w for w in watchers if type(w).working is not Observer.working]
    try:
        while True:
            with _entered(working):
                try:
                    event = next(events)
                except StopIteration:
                    return
                for w in watchers:
                    w.seen(event)
            yield event
    finally:
        for w in watchers:
            w.closed()
        getattr(events, "close", lambda: None)()  # a listener that stops early stops the run


def _entered(observers: list[Observer]) -> AbstractContextManager[Any]:
    if not observers:
        return nullcontext()
    with ExitStack() as stack:
        for o in observers:
            stack.enter_context(o.working())
        return stack.pop_all()  # entered; the caller's `with` leaves them
