"""Every fake HTTP server of the tests runs the same way: in a daemon thread, polling for shutdown
every 20 ms (serve_forever's default 0.5 s made each test's teardown wait up to half a second)."""

from __future__ import annotations

import threading
from socketserver import BaseServer

POLL_SECONDS = 0.02


def serve_in_thread(server: BaseServer) -> threading.Thread:
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
    )
    thread.start()
    return thread
