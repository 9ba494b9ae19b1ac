"""The attacker's host: an HTTP server on 127.0.0.1 that answers anything and records what reached it.

    with Attacker() as evil:
        ...  # name evil.url somewhere a URL must never be followed with a credential
        assert evil.requests == [] or all("authorization" not in r.headers for r in evil.requests)

`redirect_to` makes it answer every request with a 307 to that URL (a server that hands a client on).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.serving import serve_in_thread


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    size: int  # bytes of the body


class Attacker:
    def __init__(self, *, redirect_to: str | None = None) -> None:
        self.requests: list[Seen] = []
        self.redirect_to = redirect_to
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def credentials(self) -> list[str]:
        """Every Authorization or api-key header value that reached this host."""
        return [v for r in self.requests for k, v in r.headers.items() if k in ("authorization", "api-key")]

    def __enter__(self) -> Attacker:
        serve_in_thread(self._server)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                self.rfile.read(size)
                seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, size)
                with owner._lock:
                    owner.requests.append(seen)
                if owner.redirect_to:
                    self.send_response(307)
                    self.send_header("Location", owner.redirect_to + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = b'[{"label": "stolen", "score": 1.0}]'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = _any

        return Handler
