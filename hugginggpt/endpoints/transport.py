"""huggingface_hub's HTTP client, taught where the HF token may go and two things about our own
expert servers (experts_url).

- The HF token goes only to Hugging Face's own hosts (HF_HOSTS over https, and the Hub that HF_ENDPOINT
  names): every other request loses its Authorization header here, whatever card, plan or trace
  named the URL, and on every redirect hop. This is the one place that decides it.
- Offline mode (HF_HUB_OFFLINE) refuses every request huggingface_hub makes, to any host. An expert
  server is not the Hub: requests to a registered server pass while everything else stays refused.
- A Stop must reach the server. InferenceClient blocks on its HTTP call; for a registered server the
  call goes over a socket this module owns, and once the calling thread's stop signal is set the
  socket is shut down: the server sees its client leave and stops the model between two steps.

`install()` wraps whatever client factory huggingface_hub uses (its own, or one set by somebody
else) with these rules; the hosted endpoint calls it before each call, `register(url)` too.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from hugginggpt.observability import telemetry

_SERVERS: set[tuple[str, str, int]] = set()  # (scheme, host, port) of registered expert servers
_local = threading.local()  # .stop: the signal of the call this thread is making
_lock = threading.Lock()
_POLL_S = 0.05  # how often a waiting call looks at its stop signal
# Hugging Face's own domains (the Hub, the inference router, Inference Endpoints, Spaces, downloads).
HF_HOSTS = ("huggingface.co", "hf.co", "huggingface.cloud", "hf.space")


def _origin(scheme: str, host: str, port: int | None) -> tuple[str, str, int]:
    return scheme, host.lower(), port or (443 if scheme == "https" else 80)


def register(url: str) -> None:
    """Requests to `url`'s server pass offline mode and end on Stop (see the module's docstring)."""
    parts = urlsplit(url)
    with _lock:
        _SERVERS.add(_origin(parts.scheme, parts.hostname or "", parts.port))
    install()


def is_hf_origin(scheme: str, host: str, port: int | None) -> bool:
    """Whether the HF token may be sent to this origin: a Hugging Face host over https, or the Hub
    the operator configured (HF_ENDPOINT, which may be a mirror or, in tests, a fake)."""
    from huggingface_hub import constants

    host = host.lower()
    if scheme == "https" and any(host == h or host.endswith("." + h) for h in HF_HOSTS):
        return True
    hub = urlsplit(constants.ENDPOINT)
    return _origin(scheme, host, port) == _origin(hub.scheme, hub.hostname or "", hub.port)


def _credential_rule(request: Any) -> None:
    url = request.url
    if not is_hf_origin(url.scheme, url.host, url.port):
        request.headers.pop("authorization", None)


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


def install() -> None:
    """Our rules around the client factory huggingface_hub uses, unless they are there already
    (something may have set another factory since: it is wrapped in turn, which closes
    huggingface_hub's shared client once)."""
    from huggingface_hub import set_client_factory
    from huggingface_hub.utils import _http

    with _lock:
        current = _http._GLOBAL_CLIENT_FACTORY
        if not getattr(current, "ours", False):
            set_client_factory(_Factory(current))


class _Factory:
    """The client `inner` makes, with the credential rule first among its request hooks and our
    transport in front of its own (for registered servers)."""

    ours = True

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self) -> Any:
        client = self.inner()
        hooks = list(client.event_hooks["request"])

        def hook(request: Any) -> None:
            _credential_rule(request)
            if not _registered(request):  # huggingface_hub's own hooks (offline check, request id)
                for inner_hook in hooks:
                    inner_hook(request)

        client.event_hooks = {"request": [hook], "response": client.event_hooks["response"]}
        client._transport = _Transport(client._transport)
        return client


class _Transport:
    """The client's own transport for every other host; a plain socket, shut down on Stop, for ours."""

    def __init__(self, default: Any) -> None:
        self._default = default

    def handle_request(self, request: Any) -> Any:
        if not _registered(request):
            return self._default.handle_request(request)
        with telemetry.client_span(request.method, str(request.url)) as answered:  # traceparent names it
            response = _call(request, getattr(_local, "stop", None))
            answered(response.status_code)
            return response

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
