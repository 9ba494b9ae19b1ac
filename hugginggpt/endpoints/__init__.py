"""Where models run. The pipeline talks to every endpoint through `Endpoint`."""

from collections.abc import Mapping

from hugginggpt.endpoints.base import (
    CACHE,
    Call,
    Credentials,
    Endpoint,
    EndpointError,
    Footprint,
    ModelUnavailable,
    Result,
    Stopped,
    StopSignal,
    WrappedEndpoint,
)
from hugginggpt.endpoints.hosted import HostedEndpoint
from hugginggpt.endpoints.local import LocalEndpoint
from hugginggpt.endpoints.mcp_tool import McpToolEndpoint
from hugginggpt.endpoints.remote import RemoteEndpoint
from hugginggpt.endpoints.router import RoutedEndpoint
from hugginggpt.endpoints.space import SpaceEndpoint


def build_backends(
    *,
    hf_token: str | None = None,
    provider: str | None = None,
    timeout: float = 120.0,
    experts_url: str | None = None,
) -> dict[str, Endpoint]:
    """Every backend by the name the inference modes use ("remote" only with an expert server's
    URL). Making them costs nothing: the local runtime and the hosted client load on first use, and
    the expert server is asked what it serves when a model is first offered."""
    backends: dict[str, Endpoint] = {
        "local": LocalEndpoint(),
        "hosted": HostedEndpoint(token=hf_token, provider=provider, timeout=timeout),
        "space": SpaceEndpoint(hf_token=hf_token, timeout=timeout),
        "mcp": McpToolEndpoint(hf_token=hf_token, timeout=timeout),
    }
    if experts_url:
        backends["remote"] = RemoteEndpoint(experts_url, timeout=timeout)
    return backends


def build_endpoint(
    mode: str = "hybrid",
    *,
    hf_token: str | None = None,
    provider: str | None = None,
    timeout: float = 120.0,
    experts_url: str | None = None,
    backends: Mapping[str, Endpoint] | None = None,
) -> Endpoint:
    """The endpoint for an inference mode (hugginggpt.modes): its backends, in its order. The one
    place every caller (CLI, eval, app) gets its endpoint from; `backends`: ones already made (the
    app shares them between visitors), else made from the other arguments. The Pipeline puts the result
    cache and the observer around it once (run/pipeline.py); whom a call is for and whose cached
    results it may share travel in its Call."""
    if backends is None:
        backends = build_backends(
            hf_token=hf_token, provider=provider, timeout=timeout, experts_url=experts_url
        )
    return RoutedEndpoint(mode, backends)


__all__ = [
    "CACHE",
    "Call",
    "Credentials",
    "Result",
    "Endpoint",
    "EndpointError",
    "Footprint",
    "HostedEndpoint",
    "LocalEndpoint",
    "McpToolEndpoint",
    "ModelUnavailable",
    "RemoteEndpoint",
    "RoutedEndpoint",
    "SpaceEndpoint",
    "StopSignal",
    "Stopped",
    "build_backends",
    "WrappedEndpoint",
    "build_endpoint",
]
