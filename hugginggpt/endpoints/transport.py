"""huggingface_hub's HTTP client, taught where the HF token may go and two things about our own
expert servers (experts_url).

- The HF token goes only to Hugging Face's own hosts (HF_HOSTS over https, and the Hub that HF_ENDPOINT
  names): every other request loses its Authorization header here, whatever card, plan or trace
  named the URL, and on every redirect hop. This is the one place that decides it.
- Offline mode (HF_HUB_OFFLINE) refuses every request huggingface_hub makes, to any host. An expert
  server is not the Hub: requests to a registered server pass while everything else stays refused.
- A Stop must reach the server. InferenceClient blocks on its HTTP call; for a registered server the
  call goes over a socket this module owns, and once the call's stop signal is set the socket is
  shut down: the server sees its client leave and stops the model between two steps. The stop comes
  with the request itself: `carrying(call.stop)` gives the headers a client sends (one names the
  call), and the transport takes that header off and watches that call's signal, so concurrent calls
  in any threads never see each other's.

`install()` puts these rules into huggingface_hub through its public hooks only: the request hooks
of the client it uses now (its own offline check and request id, or those of a factory somebody
else set) are kept behind ours, in a client of our making (`set_client_factory`). The hosted
endpoint calls it before each call, `register(url)` too.
"""

from __future__ import annotations

import http.client
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from hugginggpt.observability import telemetry

_SERVERS: set[tuple[str, str, int]] = set()  # (scheme, host, port) of registered expert servers
_STOPS: dict[str, Any] = {}  # call id (CALL_HEADER) -> the stop signal of that call, while it runs
_lock = threading.Lock()
_POLL_S = 0.05  # how often a waiting call looks at its stop signal
CALL_HEADER = "x-hugginggpt-call"  # names a call's stop signal; taken off before the request leaves
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


@contextmanager
def carrying(stop: Any) -> Iterator[dict[str, str]]:
    """The headers a call's client sends so that its requests to a registered server end once
    `stop` is set (none without a stop); valid until the block ends."""
    if stop is None:
        yield {}
        return
    call_id = uuid.uuid4().hex
    with _lock:
        _STOPS[call_id] = stop
    try:
        yield {CALL_HEADER: call_id}
    finally:
        with _lock:
            _STOPS.pop(call_id, None)


def _registered(request: Any) -> bool:
    url = request.url
    return _origin(url.scheme, url.host, url.port) in _SERVERS


def install() -> None:
    """Our rules in huggingface_hub's client, unless the client it uses now has them already
    (something may have set another factory since: its request hooks are kept behind ours)."""
    from huggingface_hub import get_session, set_client_factory

    with _lock:
        hooks = get_session().event_hooks
        if not any(isinstance(hook, _Rules) for hook in hooks["request"]):
            set_client_factory(partial(_client, _Rules(hooks["request"]), list(hooks["response"])))


class _Rules:
    """The request hook: the credential rule, the call's stop taken off the headers, then the hooks
    of huggingface_hub's client (its offline check, its request id) for every host but ours."""

    def __init__(self, inner: list[Any]) -> None:
        self.inner = list(inner)

    def __call__(self, request: Any) -> None:
        url = request.url
        if not is_hf_origin(url.scheme, url.host, url.port):
            request.headers.pop("authorization", None)
        call_id = request.headers.pop(CALL_HEADER, None)
        if call_id is not None:  # a redirect hop keeps the first request's extensions
            with _lock:
                request.extensions = {**request.extensions, "stop": _STOPS.get(call_id)}
        if _registered(request):
            return
        for hook in self.inner:
            hook(request)


def _client(rules: _Rules, response_hooks: list[Any]) -> Any:
    """huggingface_hub's kind of client (redirects followed, no time-out but the call's), with our
    hook and our transport in front of the default one (for registered servers)."""
    import httpx2

    return httpx2.Client(
        event_hooks={"request": [rules], "response": response_hooks},
        follow_redirects=True,
        timeout=None,
        transport=_Transport(httpx2.HTTPTransport()),  # type: ignore[arg-type]  # duck-typed: httpx2 loads late
    )


class _Transport:
    """The default transport for every other host; a plain socket, shut down on Stop, for ours."""

    def __init__(self, default: Any) -> None:
        self._default = default

    def handle_request(self, request: Any) -> Any:
        if not _registered(request):
            return self._default.handle_request(request)
        with telemetry.client_span(request.method, str(request.url)) as answered:  # traceparent names it
            response = _call(request, request.extensions.get("stop"))
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
