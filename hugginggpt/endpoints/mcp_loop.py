"""One asyncio event loop, in one daemon thread, for every MCP client session of the process.

The `mcp` package is async (anyio); the endpoints are called from worker threads. Work is handed in
with `call()` and its result handed back; a Stop or a time-out cancels the coroutine in the loop,
where the MCP tool endpoint sends the server its cancellation notice before the session closes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from hugginggpt.endpoints.base import EndpointError, Stopped, StopSignal

T = TypeVar("T")
POLL_S = 0.05  # how often a waiting caller looks at its stop signal
_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def loop() -> asyncio.AbstractEventLoop:
    """The loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, daemon=True, name="mcp-loop").start()
        return _loop


class TimedOut(EndpointError):
    """The call took longer than its time limit."""


def call(
    make: Callable[[], Coroutine[Any, Any, T]],
    *,
    timeout: float,
    stop: StopSignal | None = None,
    what: str = "call",
    failed: Callable[[], str | None] = lambda: None,
) -> T:
    """Run `make()` in the loop and wait for it; cancelled (and Stopped / TimedOut raised) when
    `stop` is set or `timeout` seconds pass; also when `failed()` says why (EndpointError), for a
    failure the coroutine itself cannot see (a transport that gave up on a reply over budget).
    The coroutine's own EndpointError is raised as it is, also from inside an exception group."""
    future = asyncio.run_coroutine_threadsafe(make(), loop())
    deadline = time.monotonic() + timeout
    while True:
        try:
            return future.result(timeout=POLL_S)
        except BaseExceptionGroup as group:
            raise _innermost(group) from None
        except concurrent.futures.TimeoutError:
            reason = failed()
            if reason:
                _cancel(future)
                raise EndpointError(f"{what} {reason}") from None
            if stop is not None and stop.is_set():
                _cancel(future)
                raise Stopped(f"{what}: stopped") from None
            if time.monotonic() >= deadline:
                _cancel(future)
                raise TimedOut(f"{what}: no answer within {timeout:g} s") from None


def _innermost(error: BaseException) -> BaseException:
    """anyio's task groups wrap what failed inside them: the first failure, unwrapped."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _cancel(future: concurrent.futures.Future[Any]) -> None:
    """Cancel, and give the coroutine a moment to tell the server (it is not waited for longer)."""
    future.cancel()
    try:
        future.result(timeout=2.0)
    except BaseException:  # noqa: BLE001 (cancelled, or failed while cancelling: either way it is over)
        pass
