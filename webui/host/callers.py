"""Who is calling: the socket's address, or a forwarded address only from a proxy the operator trusts.

Every door counts its caps by this address (conversations per address, upload bytes per address).
`X-Forwarded-For` is written by whoever sends the request, so it is read only when the hop that
connected is a declared proxy (`trusted_proxies`, HUGGINGGPT_TRUSTED_PROXIES: addresses or networks,
comma-separated). Then the header is read from the right, where each trusted proxy appended the
address it saw: the first address that is not a trusted proxy is the caller. "*" trusts the hop
that connected whatever its address, and one hop only: on a Hugging Face Space every request comes
through the Space's own proxy, which appends the visitor's address last (the default there).

uvicorn would rewrite the socket's address from the header itself for hops it trusts (127.0.0.1 by
default, so any local client could claim any address): `trust_no_forwarding_in_uvicorn` turns that
off before launch, and the app decides here.

A caller is a network where an address says little: one IPv6 household holds a whole /64 (a
setting, caller_ipv6_prefix), so an IPv6 caller is its network ("2001:db8:1:2::/64") and every
per-caller cap (conversations, waiting calls, upload bytes, daily tokens) means one household.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Sequence
from typing import Any

ANY_HOP = "*"
MAX_ADDRESS_CHARS = 64  # a trusted proxy writes addresses; anything longer is not one

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_proxies(entries: Iterable[str]) -> tuple[Network, ...] | None:
    """The networks of `entries` (addresses are one-address networks); None for "*" (any hop).
    Raises ValueError for an entry that is neither."""
    networks = []
    for entry in entries:
        text = entry.strip()
        if text == ANY_HOP:
            return None
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(f"trusted_proxies: {text!r} is not an address, a network or '*'") from None
    return tuple(networks)


class Callers:
    def __init__(self, trusted_proxies: Sequence[str] = (), *, ipv6_prefix: int = 64):
        self.ipv6_prefix = ipv6_prefix
        self.any_hop = False
        self.networks: tuple[Network, ...] = ()
        if trusted_proxies:
            parsed = parse_proxies(trusted_proxies)
            self.any_hop = parsed is None
            self.networks = parsed or ()

    def trusts(self, host: str) -> bool:
        if self.any_hop:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self.networks)

    def address(self, peer: str, forwarded_for: Sequence[str] = ()) -> str:
        """Who is calling, from the socket's `peer` and the X-Forwarded-For header values: an
        IPv4 address, or an IPv6 caller's network."""
        return self.network(self._address(peer, forwarded_for))

    def network(self, host: str) -> str:
        """An IPv6 address as its /ipv6_prefix network; an IPv4 one (also IPv4-mapped) as itself."""
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return host
        if isinstance(address, ipaddress.IPv6Address):
            if address.ipv4_mapped is not None:
                return str(address.ipv4_mapped)
            return str(ipaddress.IPv6Network((address, self.ipv6_prefix), strict=False))
        return host

    def _address(self, peer: str, forwarded_for: Sequence[str]) -> str:
        if not peer or not self.trusts(peer):
            return peer
        hops = [hop.strip() for value in forwarded_for for hop in value.split(",") if hop.strip()]
        for hop in reversed(hops):
            host = _host(hop)
            if self.any_hop or not self.trusts(host):
                return host[:MAX_ADDRESS_CHARS]
        return peer  # every hop was a trusted proxy: the request started at one of them

    def of(self, request: Any) -> str:
        """The caller of a Starlette request or a gr.Request ("" when it has no client)."""
        request = getattr(request, "request", None) or request  # a gr.Request wraps Starlette's
        client = getattr(request, "client", None)
        peer = str(getattr(client, "host", "") or "")
        headers: Any = getattr(request, "headers", None)
        values = headers.getlist("x-forwarded-for") if hasattr(headers, "getlist") else []
        return self.address(peer, values)

    def of_scope(self, scope: dict[str, Any]) -> str:
        """The caller of an ASGI connection (for middleware)."""
        client = scope.get("client")
        peer = str(client[0]) if client else ""
        values = [v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"x-forwarded-for"]
        return self.address(peer, values)


def _host(hop: str) -> str:
    """An address without its port: 1.2.3.4:5 -> 1.2.3.4, [::1]:5 -> ::1."""
    if hop.startswith("["):
        return hop[1:].split("]", 1)[0]
    if hop.count(":") == 1:
        return hop.split(":", 1)[0]
    return hop


def trust_no_forwarding_in_uvicorn() -> None:
    """uvicorn reads FORWARDED_ALLOW_IPS when Gradio's launch() builds its server: trust no hop there."""
    os.environ["FORWARDED_ALLOW_IPS"] = ""
