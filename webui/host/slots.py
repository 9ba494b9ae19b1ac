"""How many requests are answered at once, across every door: the chat, MCP tools and the OpenAI API.

The chat's Gradio event has the same limit, so the chat alone never waits here; a request from
another door waits for a free slot like a chat message waits in Gradio's queue.
"""

from __future__ import annotations

import threading
import time

from hugginggpt.observability import metrics


class Busy(RuntimeError):
    """Too many requests are already waiting for a slot."""


class RunSlots:
    def __init__(self, size: int, *, max_waiting: int = 64, max_waiting_per_caller: int = 8):
        if size < 1:
            raise ValueError("at least one request must be able to run")
        self.size = size
        self.max_waiting = max_waiting
        self.max_waiting_per_caller = max_waiting_per_caller  # one address cannot fill the queue alone
        self._waiting_by: dict[str, int] = {}
        self._free = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._waiting = 0
        self._running = 0

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return self._waiting

    def acquire(
        self,
        cancelled: threading.Event,
        *,
        refuse_when_busy: bool = True,
        caller: str | None = None,
        poll: float = 0.1,
    ) -> bool:
        """Wait for a slot; False when `cancelled` is set first. Raises Busy (when `refuse_when_busy`)
        if `max_waiting` requests already wait, or `max_waiting_per_caller` from `caller` (an address,
        host.callers): a flood of API calls must not pile up threads, nor one caller's shut others out."""
        asked = time.perf_counter()
        if self._free.acquire(blocking=False):
            return self._started(asked)
        with self._lock:
            if refuse_when_busy and self._waiting >= self.max_waiting:
                raise Busy(f"the server is busy: {self._waiting} requests are waiting; try again later")
            mine = self._waiting_by.get(caller, 0) if caller is not None else 0
            if refuse_when_busy and caller is not None and mine >= self.max_waiting_per_caller:
                raise Busy(f"{mine} of your requests are already waiting; try again when they are answered")
            self._waiting += 1
            if caller is not None:
                self._waiting_by[caller] = mine + 1
        try:
            while not self._free.acquire(timeout=poll):
                if cancelled.is_set():
                    return False
            return self._started(asked)
        finally:
            with self._lock:
                self._waiting -= 1
                if caller is not None:
                    self._waiting_by[caller] -= 1
                    if not self._waiting_by[caller]:
                        del self._waiting_by[caller]

    def release(self) -> None:
        with self._lock:
            self._running -= 1
        self._free.release()

    def _started(self, asked: float) -> bool:
        metrics.slot_waited(time.perf_counter() - asked)
        with self._lock:
            self._running += 1
        return True
