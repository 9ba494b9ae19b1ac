"""The remote endpoint: every model the expert server offers runs there (`experts_url`).

The server is models_local served over the Hugging Face inference protocol, on Ray Serve or by
`python -m models_local.serve`. Calls take the hosted endpoint's code path (InferenceClient at the
model's URL on that server, `.../models/<id>/pipeline/<task>`), so one path serves Inference
Endpoints, TGI and this server alike. What the server offers is asked once (GET /models) and kept.
The HF token is never sent there; offline mode does not block it; a Stop closes the call's
connection, and the server stops the model (transport.py).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from dataclasses import replace
from typing import Any
from urllib.parse import quote, urlsplit

from hugginggpt.catalog import ModelCard
from hugginggpt.endpoints import transport
from hugginggpt.endpoints.base import Call, Credentials, Endpoint, Result
from hugginggpt.endpoints.hosted import HostedEndpoint
from hugginggpt.observability import telemetry

log = logging.getLogger(__name__)
RETRY_LISTING_S = 30.0  # after the server could not be asked, ask again this much later


class RemoteEndpoint(Endpoint):
    name = "remote"

    def __init__(self, url: str, *, timeout: float = 120.0, retries: int = 3) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"experts_url must be an http(s) URL of an expert server, not {url!r}")
        self.url = url.rstrip("/")
        # The server answers 503 while a replica is replaced: retried after 1, 2, 4 s.
        self.hosted = HostedEndpoint(token="", timeout=timeout, retries=retries, backoff=1.0, max_wait=10.0)
        self._listing: dict[str, Any] | None = None
        self._asked_at = -RETRY_LISTING_S
        self._lock = threading.Lock()
        transport.register(self.url)

    def describe(self) -> str:
        return f"remote (the expert server at {self.url})"

    def model_url(self, model: ModelCard, task: str) -> str:
        return f"{self.url}/models/{quote(model.id, safe='/')}/pipeline/{task}"

    def listing(self) -> dict[str, Any] | None:
        """The server's GET /models, asked once; None while it cannot be reached."""
        with self._lock:
            if self._listing is None and time.monotonic() - self._asked_at >= RETRY_LISTING_S:
                self._asked_at = time.monotonic()
                try:
                    url, traced = f"{self.url}/models", telemetry.inject({})  # traceparent, if tracing
                    asking = urllib.request.Request(url, headers=traced) if traced else url
                    with urllib.request.urlopen(asking, timeout=10) as reply:
                        self._listing = json.loads(reply.read())
                except (OSError, ValueError) as exc:
                    log.warning("the expert server %s cannot say what it serves: %s", self.url, exc)
            return self._listing

    def can_run(self, model: ModelCard) -> bool:
        if self.hosted.route(model.task, replace(model, endpoint_url=self.url)).refusal is not None:
            return False  # no protocol call for this task (depth-estimation, text-to-video)
        listing = self.listing()
        if listing is None:
            return False
        folders = {m["id"]: m.get("task") for m in listing.get("models", [])}
        if model.id in folders:
            return folders[model.id] in (None, model.task)
        return bool(listing.get("hub")) and model.path is None and model.task in listing.get("tasks", ())

    def run(self, task: str, model: ModelCard, inputs: dict[str, Any], call: Call) -> Result:
        at_server = replace(model, endpoint_url=self.model_url(model, task))
        # No HF token goes to the expert server, the visitor's neither; its stop travels in the call.
        result = self.hosted.run(task, at_server, inputs, replace(call, credentials=Credentials()))
        return Result(outputs=result.outputs, answered_by=self.name)
