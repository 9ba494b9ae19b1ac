"""A per-address budget of upload bytes for the page's upload route (Gradio's POST .../upload).

An upload lands in Gradio's cache before any handler sees it, and stays there until Gradio's sweep
(`app_upload_keep_hours`) unless a conversation takes it in. Without a budget anyone could fill the
disk with files no conversation uses. Each address (webui.host.callers) may upload `max_bytes` within
`window_seconds`; an upload is charged by its declared length before a byte of it is read, so a
refused one costs nothing. uvicorn reads no more body than the declared length.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from webui.host.callers import Callers


class UploadQuota:
    """ASGI middleware: refuses (429) an upload that would take its caller over the budget."""

    def __init__(
        self,
        app: Any,
        *,
        callers: Callers,
        max_bytes: int,
        window_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.callers = callers
        self.max_bytes = max_bytes
        self.window_seconds = window_seconds
        self.clock = clock
        self._charges: dict[str, deque[tuple[float, int]]] = {}
        self._lock = threading.Lock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("method") == "POST" and _is_upload(scope.get("path", "")):
            refusal = self._charge(scope)
            if refusal is not None:
                await _answer(send, *refusal)
                return
        await self.app(scope, receive, send)

    def _charge(self, scope: dict[str, Any]) -> tuple[int, str] | None:
        """None when the upload fits the caller's budget (then it is charged), else the refusal."""
        length = _content_length(scope)
        if length is None:
            return 411, "An upload must say its length (Content-Length)."
        who = self.callers.of_scope(scope)
        now = self.clock()
        with self._lock:
            self._forget_before(now - self.window_seconds)
            charges = self._charges.setdefault(who, deque())
            used = sum(size for _, size in charges)
            if used + length > self.max_bytes:
                hours = self.window_seconds / 3600
                return 429, (
                    f"Upload limit reached: {self.max_bytes / 1e6:.0f} MB per {hours:g} h from one address. "
                    "Try again later."
                )
            charges.append((now, length))
        return None

    def _forget_before(self, cutoff: float) -> None:
        for who in list(self._charges):
            charges = self._charges[who]
            while charges and charges[0][0] < cutoff:
                charges.popleft()
            if not charges:
                del self._charges[who]


def _is_upload(path: str) -> bool:
    return path.rstrip("/").endswith("/gradio_api/upload")


def _content_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return max(0, int(value))
            except ValueError:
                return None
    return None


async def _answer(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
