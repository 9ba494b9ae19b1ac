"""A request's run belongs to its conversation, not to the page that started it.

The pipeline's events are fed into the run's RunView by the thread that drives the run (`drive`),
which also finishes the run (its notes, the history, the save to disk) once it has ended; after
Stop, a run whose blocking call has not returned is ended after a grace instead. A page only follows
it: a reload or a closed tab leaves the run going, and a page that opens the conversation meanwhile
(after a reload, in another tab) follows it from where it is. Stop, deleting the conversation, the
request's own deadlines and the app's end stop a run; so does the end of an API client's stream,
whose conversation no page can come back to (webui.chat.engine).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from hugginggpt.run.events import Done, ErrorKind, Event, Outcome
from webui.chat.render import RunView
from webui.host.run_entry import RunEntry

log = logging.getLogger(__name__)

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

    def feed(self, event: Any) -> None:
        """One of the run's events, from the thread that drives it; its Done ends the run."""
        with self._changed:
            if self.ended:
                return
            self.view.feed(event)
            if self.view.done is not None:
                self._end()
                return
            self._version += 1
            self._changed.notify_all()

    def end_after_grace(self) -> None:
        """Once stopped, the run ends STOP_GRACE_SECONDS later even while a blocking call (the LLM)
        is still out; a run that ended by then is left as it is. Runs in a thread of its own."""
        self.cancel.wait()
        time.sleep(STOP_GRACE_SECONDS)
        self.end(Done(Outcome.CANCELLED))

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

    def follow(self, *, ends_with_stream: bool = False) -> Iterator[Update]:
        """The chat now, then after each change, until the run has ended (the last update says so).
        A follower that stops early (its page went away) changes nothing for the run, unless the
        run `ends_with_stream` (an API client's, whose conversation no page can come back to)."""
        seen = -1
        try:
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
        finally:
            if ends_with_stream:
                self.end(Done(Outcome.CANCELLED))

    def drive(
        self,
        entry: RunEntry,
        caller: str,
        start: Callable[[threading.Event], Iterator[Event]],
        *,
        then: Callable[[], object],
    ) -> None:
        """Runs `start(cancel)` (the pipeline's events) through the run entry, in the calling thread
        (one of its own, so that the chat can give up on it at once when stopped), feeding each event
        to the run; `then()` before the run ends. Stop, a page left or the request's deadline: the
        chat moves on after the grace, and so does the slot, even while a blocking call of the run
        has not returned yet."""
        started = False
        try:  # busy with API calls: waits its turn
            run = entry.run(
                caller, self.cancel, lambda: start(self.cancel), wait=True, grace=STOP_GRACE_SECONDS
            )
            for event in run:
                started = True
                self.feed(event)
        except Exception:  # Pipeline.run reports failures in Done; anything else is a bug
            started = True
            log.exception("the pipeline crashed")
        finally:
            then()
            crashed = Done(Outcome.FAILED, error=ENDED_EARLY, error_kind=ErrorKind.INTERNAL)  # no Done
            self.end(crashed if started else Done(Outcome.CANCELLED))  # nothing when its Done ended it
