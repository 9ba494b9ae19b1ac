"""The one place a visitor's run starts, whichever door or action: the chat, every re-run action
(webui.chat.review_chat), continuing a cut-off run (webui.chat.resume_runs), the OpenAI API and MCP
(webui.doors.calls).

`admit` is the run's admission: the caller's daily tokens (refused at once when spent) and its
pipeline, whose every LLM call the ledger reserves and settles (Host.pipeline, webui.host.charged_llm).
`run` holds one of the requests-at-once slots (webui.host.slots) before anything of the run is done,
the uploads' decoding included (`start` does that first), and hands back the run's events.
No other module takes a slot or starts a pipeline's run for a visitor (tests/test_run_entry.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from hugginggpt.config import Settings
from hugginggpt.run.pipeline import Pipeline
from webui.host.slots import RunSlots
from webui.host.token_budget import DailyTokens

T = TypeVar("T")

_inside = threading.local()  # set while a run's `start` is called: the pipeline is started from here


class Refused(Exception):
    """The run was not started; the message says why, in the visitor's words."""

    def __init__(self, why: str, *, spent: bool = False):
        super().__init__(why)
        self.spent = spent  # the caller's daily tokens, rather than its settings


def started_here() -> bool:
    """Whether the calling thread is starting a run through RunEntry.run (tests check every path)."""
    return getattr(_inside, "depth", 0) > 0


class RunEntry:
    def __init__(self, tokens: DailyTokens, slots: RunSlots, pipeline: Callable[..., Pipeline]):
        self.tokens = tokens
        self.slots = slots
        self._pipeline = pipeline  # Host.pipeline: the one way a pipeline is built, with the ledger

    def admit(
        self, caller: str, settings: Callable[[], Settings], *, asks_llm: bool = True, **how: Any
    ) -> Pipeline:
        """The pipeline for `caller`'s run, with `how` (Host.pipeline's keywords). Refused (`spent`)
        when the run `asks_llm` and the caller's tokens for the day are spent or taken by its runs
        going on; Refused for a settings problem (`settings` raises ValueError, or Refused in words
        of its own, as an API's headers are named)."""
        refusal = self.tokens.refusal(caller) if asks_llm else None
        if refusal:
            raise Refused(refusal, spent=True)
        try:
            return self._pipeline(settings(), caller=caller, **how)
        except ValueError as e:
            raise Refused(f"**Settings problem:** {e}") from None

    def run(
        self,
        caller: str,
        cancelled: threading.Event,
        start: Callable[[], Iterator[T]],
        *,
        wait: bool = False,
        grace: float | None = None,
    ) -> Iterator[T]:
        """`start()`'s items (a run's events) once a slot is held; nothing when `cancelled` is set
        while waiting for one. Raises slots.Busy when too many runs wait (in all, or `caller`'s),
        unless `wait`. With `grace`, a cancelled run's slot is given back that many seconds after
        the cancel, even while a blocking call of the run has not returned yet."""
        with self._slot(cancelled, caller=caller, wait=wait, grace=grace) as held:
            if not held:
                return
            _inside.depth = getattr(_inside, "depth", 0) + 1
            try:
                items = start()
            finally:
                _inside.depth -= 1
            try:
                yield from items
            finally:
                if isinstance(items, Generator):  # its own clean-up runs now, not at GC
                    items.close()

    @contextmanager
    def _slot(
        self,
        cancelled: threading.Event,
        *,
        caller: str | None = None,
        wait: bool = False,
        grace: float | None = None,
    ) -> Iterator[bool]:
        """One of the requests-at-once slots for the block (True), or False when `cancelled` was set
        while waiting. Only `run` takes one: a run's uploads are decoded under it, by its `start`."""
        got = self.slots.acquire(cancelled, refuse_when_busy=not wait, caller=caller)
        give_back = _once(self.slots.release if got else lambda: None)
        if got and grace is not None:
            args = (cancelled, grace, give_back)
            threading.Thread(target=_give_back_when_given_up, args=args, daemon=True).start()
        try:
            yield got
        finally:
            give_back()


def _give_back_when_given_up(cancelled: threading.Event, grace: float, give_back: Callable[[], None]) -> None:
    cancelled.wait()
    time.sleep(grace)
    give_back()


def _once(action: Callable[[], None]) -> Callable[[], None]:
    lock, done = threading.Lock(), list[bool]()

    def once() -> None:
        with lock:
            if done:
                return
            done.append(True)
        action()

    return once
