"""GET /metrics on the app's port (HUGGINGGPT_METRICS=1): the Prometheus text of
hugginggpt.observability.metrics, behind a bearer key when metrics_key is set; OpenMetrics (with
exemplars) when the scraper asks."""

from __future__ import annotations

import hmac

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from hugginggpt.observability import metrics


def route(key: str | None = None) -> Route:
    async def scrape(request: Request) -> Response:
        if key:
            given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), key.encode()):
                return PlainTextResponse(
                    "A bearer key is needed for /metrics.\n", 401, headers={"WWW-Authenticate": "Bearer"}
                )
        body, content_type = metrics.render(request.headers.get("accept", ""))
        return Response(body, headers={"Content-Type": content_type})

    return Route("/metrics", scrape, methods=["GET"])
