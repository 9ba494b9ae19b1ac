"""huggingface_hub's HTTP client, taught two things about our own expert servers (experts_url).

- Offline mode (HF_HUB_OFFLINE) refuses every request huggingface_hub makes, to any host. An expert
  server is not the Hub: requests to a registered server pass while everything else stays refused.
- A Stop must reach the server. InferenceClient blocks on its HTTP call; for a registered server the
  call goes over a socket this module owns, and once the calling thread's stop signal is set the
  socket is shut down: the server sees its client leave and stops the model between two steps.

`register(url)` installs the client (huggingface_hub.set_client_factory) the first time; requests to
other hosts go through httpx as before, with huggingface_hub's own request hook.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from .. import telemetry

_SERVERS: set[tuple[str, str, int]] = set()  # (scheme, host, port) of registered expert servers
_local = threading.local()  # .stop: the signal of the call this thread is making
_lock = threading.Lock()
_POLL_S = 0.05  # how often a waiting call looks at its stop signal


def _origin(scheme: str, host: str, port: int | None) -> tuple[str, str, int]:
    return scheme, host.lower(), port or (443 if scheme == "https" else 80)


def register(url: str) -> None:
    """Requests to `url`'s server pass offline mode and end on Stop (see the module's docstring)."""
    parts = urlsplit(url)
    with _lock:
        _SERVERS.add(_origin(parts.scheme, parts.hostname or "", parts.port))
    _install()


@contextmanager
def stoppable(stop: Any) -> Iterator[None]:
    """Calls this thread makes to a registered server meanwhile end when `stop` is set."""
    before, _local.stop = getattr(_local, "stop", None), stop
    try:
        yield
    finally:
        _local.stop = before


def _registered(request: Any) -> bool:
    url = request.url
    return _origin(url.scheme, url.host, url.port) in _SERVERS


def _install() -> None:
    """Our client factory, unless it is already the one huggingface_hub uses (something may have set
    another since: it is set again, which closes huggingface_hub's shared client once)."""
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils import _http

    with _lock:
        if getattr(_http, "_GLOBAL_CLIENT_FACTORY", None) is not _client:
            set_client_factory(_client)


def _client() -> Any:
    import httpx2

    return httpx2.Client(
        event_hooks={"request": [_hook]},
        follow_redirects=True,
        timeout=None,
        # _Transport has httpx2.BaseTransport's methods without subclassing it (no httpx2 import at load)
        transport=_Transport(),  # type: ignore[arg-type]
    )


def _hook(request: Any) -> Any:
    """huggingface_hub's own request hook (offline check, request id), except for our servers."""
    from huggingface_hub.utils import _http

    return None if _registered(request) else _http.hf_request_event_hook(request)


class _Transport:
    """httpx's transport for every other host; a plain socket, shut down on Stop, for ours."""

    def __init__(self) -> None:
        import httpx2

        self._default = httpx2.HTTPTransport()

    def handle_request(self, request: Any) -> Any:
        if not _registered(request):
            return self._default.handle_request(request)
        return _call(request, getattr(_local, "stop", None))

    def close(self) -> None:
        self._default.close()

    def __enter__(self) -> _Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _call(request: Any, stop: Any) -> Any:
    import httpx2

    url = request.url
    timeout = (request.extensions.get("timeout") or {}).get("read")
    kind = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
    conn = kind(url.host, url.port, timeout=timeout)
    done = threading.Event()
    headers = {k: v for k, v in request.headers.items() if k.lower() != "accept-encoding"}  # plain bytes back
    telemetry.inject(headers)  # the expert server's spans join the request's trace

    def watch() -> None:  # shut the socket once the caller stops wanting the answer
        while not done.wait(_POLL_S):
            if stop.is_set():
                sock = conn.sock
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return

    if stop is not None:
        threading.Thread(target=watch, daemon=True, name="stop-watch").start()
    try:
        conn.request(request.method, url.raw_path.decode("ascii"), body=request.read(), headers=headers)
        response = conn.getresponse()
        body = response.read()
    except TimeoutError as exc:
        raise httpx2.ReadTimeout(f"no answer from {url.host}:{url.port} in time", request=request) from exc
    except ConnectionRefusedError as exc:
        raise httpx2.ConnectError(f"{url.host}:{url.port} refused the connection", request=request) from exc
    except (OSError, http.client.HTTPException) as exc:
        if stop is not None and stop.is_set():
            raise httpx2.ReadError("stopped: the call was abandoned", request=request) from exc
        raise httpx2.ReadError(f"{type(exc).__name__}: {exc}", request=request) from exc
    finally:
        done.set()
        conn.close()
    return httpx2.Response(response.status, headers=response.getheaders(), content=body, request=request)
