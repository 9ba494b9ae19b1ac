"""A request's run belongs to its conversation, not to the page that started it.

The pipeline's events are consumed into the run's RunView by a thread of the run's own, which also
finishes the run (its notes, the history, the save to disk) once it has ended. A page only follows
it: a reload or a closed tab leaves the run going, and a page that opens the conversation meanwhile
(after a reload, in another tab) follows it from where it is. Stop, deleting the conversation, the
request's own deadlines and the app's end stop a run; so does the end of an API client's stream,
whose conversation no page can come back to (webui.chat.engine).
"""

from __future__ import annotations

import asyncio
import copy
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from hugginggpt.run.events import Done, ErrorKind, Outcome
from webui.chat.render import RunView

ENDED_EARLY = "Internal error: the request ended early."
STOP_GRACE_SECONDS = 2.0  # after Stop, how long the run may take to wind down before the chat moves on
FOLLOW_WAKE_SECONDS = 1.0  # a follower that saw nothing new looks again this often

Update = tuple[list[dict[str, Any]], list[str], bool]  # (chat messages, trace files, still running)


class LiveRun:
    """One running request. `before()` is the chat up to it (the conversation's display),
    `traces()` its trace files; `finish()` is called once, with the run ended (`view.done` set)
    and no follower reading, to fold the run into the conversation and save it."""

    def __init__(
        self,
        view: RunView,
        cancel: threading.Event,
        *,
        before: Callable[[], list[dict[str, Any]]],
        traces: Callable[[], list[str]],
        finish: Callable[[], None],
    ):
        self.view, self.cancel = view, cancel
        self._before, self._traces, self._finish = before, traces, finish
        self._changed = threading.Condition()
        self._version = 0
        self.ended = False

    def consume(self, events: queue.Queue, poll: float = 0.05) -> None:
        """Feeds the run's events (None: the worker has ended) until its Done, or until a stopped run
        has had its grace; then finishes it. Runs in the run's own thread."""
        stop_deadline = None
        while not self.ended:
            try:
                batch = [events.get(timeout=poll)]
            except queue.Empty:
                if self.cancel.is_set():
                    stop_deadline = stop_deadline or time.monotonic() + STOP_GRACE_SECONDS
                    if time.monotonic() > stop_deadline:  # a blocking call (the LLM) is still out
                        self.end(Done(Outcome.CANCELLED))
                continue
            while batch[-1] is not None:  # coalesce what is already there into one update
                try:
                    batch.append(events.get_nowait())
                except queue.Empty:
                    break
            self._feed(batch)

    def _feed(self, batch: list[Any]) -> None:
        with self._changed:
            if self.ended:
                return
            for event in batch:
                if event is None:  # the worker ended without Done: cannot happen unless it crashed
                    event = Done(Outcome.FAILED, error=ENDED_EARLY, error_kind=ErrorKind.INTERNAL)
                self.view.feed(event)
                if self.view.done is not None:
                    self._end()
                    return
            self._version += 1
            self._changed.notify_all()

    def end(self, done: Done) -> None:
        """Ends the run now with `done` (unless it has ended already): Stop's grace is over, or the
        page of a run that nobody can come back to went away."""
        with self._changed:
            if self.ended:
                return
            self.view.feed(done)
            self._end()

    def _end(self) -> None:
        try:
            self._finish()
        finally:  # followers stop following even if finishing failed
            self.ended = True
            self._version += 1
            self._changed.notify_all()

    def _snapshot(self) -> Update:
        if self.ended:  # the run's messages are in the conversation's display now
            return list(self._before()), list(self._traces()), False
        # A copy: the run's thread changes its messages while the page sends them out.
        return self._before() + copy.deepcopy(self.view.messages), list(self._traces()), True

    async def changes(self, poll: float = 0.1) -> AsyncIterator[Update]:
        """As `follow`, for a page's handler: it waits on the event loop, holding no thread (a
        thread each would let a few followers of long runs take all of Gradio's workers)."""
        seen = -1
        while True:
            if self._version == seen:
                await asyncio.sleep(poll)
                continue
            with self._changed:  # held by the run's thread only while it feeds a batch
                seen, update = self._version, self._snapshot()
            yield update
            if not update[2]:
                return

    def follow(self) -> Iterator[Update]:
        """The chat now, then after each change, until the run has ended (the last update says so).
        A follower that stops early (its page went away) changes nothing for the run."""
        seen = -1
        while True:
            with self._changed:
                if self._version == seen:
                    self._changed.wait(timeout=FOLLOW_WAKE_SECONDS)
                if self._version == seen:
                    continue
                seen = self._version
                update = self._snapshot()
            yield update
            if not update[2]:
                return
