"""A warning for an operator whose private app is reached through a reverse proxy.

An app that listens on loopback treats its visitors as trusted: they may type any LLM base URL,
the server's internal services included. Behind a reverse proxy on the same host every visitor
arrives from loopback, so strangers get that trust. Forwarding headers say a proxy is in front:
the first request that carries them logs one warning naming the fix (HUGGINGGPT_PUBLIC=1).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger(__name__)

FORWARDING_HEADERS = frozenset({b"forwarded", b"x-forwarded-for", b"x-forwarded-host", b"x-real-ip"})
WARNING = (
    "a request arrived through a proxy (it carries %s), but this app is not public: it treats every "
    "visitor as trusted (any LLM base URL, the server's own network included). Behind a reverse "
    "proxy, set HUGGINGGPT_PUBLIC=1 (README: Deploying behind a proxy)."
)


class ProxyWarning:
    """ASGI middleware: one warning, at the first request with forwarding headers; then nothing."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._warned = threading.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and not self._warned.is_set():
            found = sorted(
                name.decode() for name, _ in scope.get("headers", []) if name in FORWARDING_HEADERS
            )
            if found and not self._warned.is_set():
                self._warned.set()
                log.warning(WARNING, ", ".join(found))
        await self.app(scope, receive, send)
