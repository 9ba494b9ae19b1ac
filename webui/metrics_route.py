"""GET /metrics on the app's port (HUGGINGGPT_METRICS=1): the Prometheus text of hugginggpt.metrics,
behind a bearer key when metrics_key is set."""

from __future__ import annotations

import hmac

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from hugginggpt import metrics


def route(key: str | None = None) -> Route:
    async def scrape(request: Request) -> Response:
        if key:
            given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), key.encode()):
                return PlainTextResponse(
                    "A bearer key is needed for /metrics.\n", 401, headers={"WWW-Authenticate": "Bearer"}
                )
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return Route("/metrics", scrape, methods=["GET"])
