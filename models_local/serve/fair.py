"""Each client's share of the expert server's connections: one client's stalled uploads cannot
take every place (uvicorn's `limit_concurrency` is global, so 63 uploads stalled after their
headers made every other client's request 503 until their bodies timed out).

A client is the connecting address, or behind a declared proxy (`trusted_proxies`: addresses or
networks) the last X-Forwarded-For hop that is not one. A request past its client's share is
answered 503 at once and its connection closed, so it holds no place either.
"""

from __future__ import annotations

import ipaddress
import json
import threading
from collections.abc import Sequence
from typing import Any

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def per_client_default(max_connections: int) -> int:
    """A quarter of the places: four clients can fill the server, none alone."""
    return max(1, max_connections // 4)


def parse_networks(entries: Sequence[str]) -> tuple[Network, ...]:
    """ValueError names an entry that is neither an address nor a network."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ValueError(f"trusted_proxies: {entry!r} is not an address or a network") from None
    return tuple(networks)


class FairShare:
    """ASGI middleware: at most `per_client` requests of one client at once."""

    def __init__(self, app: Any, *, per_client: int, trusted_proxies: Sequence[str] = ()) -> None:
        self.app = app
        self.per_client = per_client
        self.proxies = parse_networks(trusted_proxies)
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = self.client(scope)
        with self._lock:
            held = self._open.get(client, 0)
            if held < self.per_client:
                self._open[client] = held + 1
        if held >= self.per_client:
            await _refuse(send, f"this client has {held} requests open, its share of the server")
            return
        try:
            await self.app(scope, receive, send)
        finally:
            with self._lock:
                left = self._open[client] - 1
                if left:
                    self._open[client] = left
                else:
                    del self._open[client]

    def client(self, scope: dict[str, Any]) -> str:
        peer = str(scope["client"][0]) if scope.get("client") else ""
        if not self._trusted(peer):
            return peer
        hops = [
            hop.strip()
            for name, value in scope.get("headers", [])
            if name == b"x-forwarded-for"
            for hop in value.decode("latin-1").split(",")
            if hop.strip()
        ]
        for hop in reversed(hops):
            if not self._trusted(hop):
                return hop[:64]
        return peer

    def _trusted(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self.proxies)


async def _refuse(send: Any, why: str) -> None:
    body = json.dumps({"error": why}).encode()
    headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
