"""Running a stage's generator to its end from plain code: each item handed on, the result returned.

A stage is a generator of events that returns its result (`value = yield from steps` inside another
stage); code that is not a generator itself (a thread, a command) uses `drain`, and `collect` for a
run's events, whose last is its Done.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from typing import TypeVar

from hugginggpt.run.events import Done, Event

T = TypeVar("T")
R = TypeVar("R")


def drain(steps: Generator[T, None, R], each: Callable[[T], object] | None = None) -> R:
    """Run `steps` to its end, handing each item to `each`; what `steps` returned."""
    while True:
        try:
            item = next(steps)
        except StopIteration as end:
            return end.value
        if each is not None:
            each(item)


def collect(events: Iterable[Event], each: Callable[[Event], object] | None = None) -> Done:
    """The Done that ends a run's events, each event before it handed to `each`."""
    for event in events:
        if isinstance(event, Done):
            return event
        if each is not None:
            each(event)
    raise RuntimeError("the run's events ended without a Done")
