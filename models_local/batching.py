"""Concurrent calls to the same model run as one batch: the one batcher of the runtime, so the
expert server (one machine or a Ray Serve runner) and the app's in-process runtime batch alike.

Calls with the same key (the loaded model and every argument that must match, see
handlers.base.Batching) meet in one line. A call that finds its line quiet and the model free runs
at once in its own thread, as if unbatched. Calls that arrive while the model is busy wait for the
line's worker thread, which takes them as one batch once it holds the model; while calls keep
company (a batch of more than one, or calls arriving during a run) it first waits up to the window
for more, and at most a quarter of its last run's time (a fast model waits less). Each call is
still its own: its caller waits on its own event and leaves at once when its stop is set (a call
not started yet is left out of its batch; a started one's result is discarded), and it gets its
own error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from models_local.handlers.base import Outputs, Stopped

WINDOW_S = 0.005  # how long a line under load waits for more calls before it runs
WAIT_SHARE = 0.25  # ... and at most this share of its last run's time (a fast model waits less)
COMPANY_S = 1.0  # a line had company this recently: the next batch waits the window
IDLE_S = 2.0  # a line's worker ends after this long without calls
POLL_S = 0.02  # how often a waiting caller looks at its stop signal


@dataclass(eq=False)
class Call:
    """One member of a batch: its inputs, where its outputs go, and how it ended."""

    inputs: dict[str, str]
    outputs: Outputs
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    batch_size: int = 0  # how many calls ran with it (0: it never ran)
    left: bool = False  # the caller stopped waiting

    @property
    def stopped(self) -> bool:
        stop = self.outputs.stop
        return self.left or (stop is not None and stop.is_set())


# Runs the calls of one batch, holding the model; sets each call's error where it failed.
RunBatch = Callable[[list[Call]], None]


class Batcher:
    """Lines of calls by key, each served by a worker thread while it has calls."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._lock = threading.Lock()
        self._lines: dict[Hashable, _Line] = {}

    def call(
        self, key: Hashable, call: Call, *, lock: Any, run: RunBatch, most: int, crowded: bool = False
    ) -> int:
        """Run `call` in a batch of up to `most` calls with the same key, once `lock` (the model's)
        is held; returns the batch size, raises the call's error. `run` is the same for a key.
        `crowded`: other calls of the model are on their way (e.g. waiting for it to load)."""
        with self._lock:
            line = self._lines.get(key)
            if line is None:
                line = self._lines[key] = _Line(self, key, lock, run, most)
            alone = line.quiet() and not crowded
            if alone:
                line.direct = True
            else:
                line.add(call, crowded)
        if alone:
            self._alone(line, call)
        else:
            while not call.done.wait(POLL_S):
                if call.stopped:
                    call.left = True  # the worker leaves it out, or drops what it made
                    raise Stopped("stopped")
        if call.error is not None:
            raise call.error
        if call.stopped:  # stopped while its batch ran on: what it made is not wanted
            raise Stopped("stopped")
        return call.batch_size

    def _alone(self, line: _Line, call: Call) -> None:
        """A call that finds its line quiet runs in its own thread at once: no hand-over to the
        worker (two thread switches, which cost milliseconds on a busy machine). Calls arriving
        meanwhile wait for the worker, which runs them as one batch once this call is done."""
        try:
            with line.lock:
                line.run_batch([call])
        finally:
            with self._lock:
                line.direct = False
                if not line.worker and not line.pending:
                    del self._lines[line.key]

    def waiting(self) -> int:
        """Calls waiting for their batch to start, in every line."""
        with self._lock:
            return sum(len(line.pending) for line in self._lines.values())


class _Line:
    def __init__(self, batcher: Batcher, key: Hashable, lock: Any, run: RunBatch, most: int) -> None:
        self.batcher, self.key, self.lock, self.run, self.most = batcher, key, lock, run, max(1, most)
        self.pending: list[Call] = []
        self.wake = threading.Condition(batcher._lock)
        self.company_at = -COMPANY_S  # when the line last had more than one call at a time
        self.direct = False  # a call runs alone in its caller's thread
        self.running = False  # the worker runs a batch
        self.worker = False  # the worker thread is there
        self.last_run_s = 0.0  # how long the last batch (or lone call) took

    def quiet(self) -> bool:
        """No call waits or runs, none did together lately, and the model is free (not busy with
        calls of other arguments). Caller holds the batcher's lock."""
        busy = self.pending or self.direct or self.running or self.lock.locked()
        return not busy and time.monotonic() - self.company_at >= COMPANY_S

    def add(self, call: Call, crowded: bool) -> None:
        """Queue `call` for the worker. Caller holds the batcher's lock."""
        if self.direct or self.running or crowded:
            self.company_at = time.monotonic()
        self.pending.append(call)
        if not self.worker:
            self.worker = True
            threading.Thread(target=self._serve, name="batch", daemon=True).start()
        self.wake.notify()

    def _serve(self) -> None:
        while True:
            with self.wake:
                if not self.wake.wait_for(lambda: self.pending, timeout=IDLE_S):
                    self.worker = False
                    if not self.direct:  # under the batcher's lock: no call is adding
                        del self.batcher._lines[self.key]
                    return
                if len(self.pending) > 1 or time.monotonic() - self.company_at < COMPANY_S:
                    wait = self.batcher.window_s
                    if self.last_run_s:  # a fast model waits less
                        wait = min(wait, WAIT_SHARE * self.last_run_s)
                    self.wake.wait_for(lambda: len(self.pending) >= self.most, timeout=wait)
            with self.lock:  # calls arriving while the model is busy join this batch
                with self.wake:
                    batch, self.pending = self.pending[: self.most], self.pending[self.most :]
                    self.running = True
                    if len(batch) > 1 or self.pending:
                        self.company_at = time.monotonic()
                try:
                    self.run_batch(batch)
                finally:
                    with self.wake:
                        self.running = False

    def run_batch(self, batch: list[Call]) -> None:
        """The calls of `batch` not stopped yet, as one batch; every call is done after."""
        live = [c for c in batch if not c.stopped]
        started = time.monotonic()
        try:
            for c in live:
                c.batch_size = len(live)
            if live:
                self.run(live)
                self.last_run_s = time.monotonic() - started
        except BaseException as exc:  # a bug in run itself: every call hears it, the line goes on
            for c in live:
                c.error = c.error or exc
        finally:
            for c in batch:
                if c not in live:
                    c.error = Stopped("stopped")
                c.done.set()
