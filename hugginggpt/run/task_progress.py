"""A task's model download and load as TaskProgress events: bytes, speed and time left, a few a second.

The local runtime reports every chunk it writes, from several download threads; the chat, the terminal
and the API need a line they can redraw, so reports are thinned out here, at the source.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from hugginggpt.run.events import Phase, TaskProgress
from hugginggpt.stages.choice import size_text

EVERY_SECONDS = 0.5  # at most two events a second per task, besides the first, the last and a new phase


class ProgressEvents:
    """A progress callback (endpoints.base.ProgressReport) for one task's call, posting events."""

    def __init__(
        self,
        task_id: int,
        task: str,
        model: str,
        post: Callable[[TaskProgress], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.task_id, self.task, self.model = task_id, task, model
        self.post = post
        self.clock = clock
        self._lock = threading.Lock()
        self._phase: Phase | None = None
        self._started = 0.0
        self._first_bytes = 0
        self._last_post = 0.0
        self._closed = False

    def close(self) -> None:
        """The call is over (or timed out, its thread left running): later reports are dropped."""
        with self._lock:
            self._closed = True

    def __call__(self, phase: str, done: int, total: int) -> None:
        try:
            step = Phase(phase)
        except ValueError:  # a phase this version does not know: nothing to show
            return
        with self._lock:
            if self._closed:
                return
            now = self.clock()
            new_phase = step is not self._phase
            if new_phase:
                self._phase, self._started, self._first_bytes = step, now, done
            finished = step is Phase.DOWNLOAD and total > 0 and done >= total
            if not (new_phase or finished or now - self._last_post >= EVERY_SECONDS):
                return
            self._last_post = now
            self.post(self._event(step, done, total, now))

    def _event(self, phase: Phase, done: int, total: int, now: float) -> TaskProgress:
        if phase is Phase.LOAD:
            return TaskProgress(self.task_id, self.task, self.model, phase)
        if phase is Phase.RUN:  # the tool's own steps, not bytes: no speed or time left
            return TaskProgress(self.task_id, self.task, self.model, phase, done, total or None)
        elapsed = now - self._started
        speed = (done - self._first_bytes) / elapsed if elapsed > 0.2 else None  # too soon to tell
        left = (total - done) / speed if speed and total >= done else None
        return TaskProgress(self.task_id, self.task, self.model, phase, done, total or None, speed, left)


def words(event: TaskProgress) -> str:
    """In words: "downloading 1.2 GB of 4 GB · 35 MB/s · 1 min left", or "loading weights"."""
    if event.phase is Phase.LOAD:
        return "loading weights"
    if event.phase is Phase.RUN:
        return f"running: {event.done_bytes} of {event.total_bytes}" if event.total_bytes else "running"
    done = size_text(event.done_bytes)
    parts = [
        f"downloading {done} of {size_text(event.total_bytes)}"
        if event.total_bytes
        else f"downloading {done}"
    ]
    if event.bytes_per_second:
        parts.append(f"{size_text(int(event.bytes_per_second))}/s")
    if event.seconds_left is not None:
        parts.append(_time_left(event.seconds_left))
    return " · ".join(parts)


def _time_left(seconds: float) -> str:
    if seconds < 60:
        return f"{max(1, round(seconds))} s left"
    if seconds < 3600:
        return f"{round(seconds / 60)} min left"
    return f"{seconds / 3600:.1f} h left"
