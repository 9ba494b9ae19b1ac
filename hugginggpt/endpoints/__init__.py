"""Where models run. The pipeline talks to every endpoint through `Endpoint`."""

from .base import Endpoint, EndpointError, ModelUnavailable, Stopped, StopSignal
from .hosted import HostedEndpoint
from .local import LocalEndpoint
from .router import POLICIES, RoutedEndpoint


def build_endpoint(
    mode: str = "hybrid", *, hf_token: str | None = None, provider: str | None = None, timeout: float = 120.0
) -> Endpoint:
    """The endpoint for an inference policy: "local", "hosted" or "hybrid" (local first)."""
    if mode not in POLICIES:
        raise ValueError(f"unknown inference mode {mode!r}: use one of {', '.join(POLICIES)}")
    # The router keeps only the backends its policy uses; making either costs nothing.
    hosted = HostedEndpoint(token=hf_token, provider=provider, timeout=timeout)
    return RoutedEndpoint(mode, local=LocalEndpoint(), hosted=hosted)


__all__ = [
    "POLICIES",
    "Endpoint",
    "EndpointError",
    "HostedEndpoint",
    "LocalEndpoint",
    "ModelUnavailable",
    "RoutedEndpoint",
    "StopSignal",
    "Stopped",
    "build_endpoint",
]
