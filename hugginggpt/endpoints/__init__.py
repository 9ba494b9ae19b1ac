"""Where models run. The pipeline talks to every endpoint through `Endpoint`."""

from .base import Endpoint, EndpointError, ModelUnavailable, Stopped, StopSignal
from .hosted import HostedEndpoint
from .local import LocalEndpoint
from .router import RoutedEndpoint


def build_backends(
    *, hf_token: str | None = None, provider: str | None = None, timeout: float = 120.0
) -> dict[str, Endpoint]:
    """Every backend by the name the inference modes use. Making them costs nothing: the local
    runtime and the hosted client load on first use."""
    return {
        "local": LocalEndpoint(),
        "hosted": HostedEndpoint(token=hf_token, provider=provider, timeout=timeout),
    }


def build_endpoint(
    mode: str = "hybrid", *, hf_token: str | None = None, provider: str | None = None, timeout: float = 120.0
) -> Endpoint:
    """The endpoint for an inference mode (hugginggpt.modes): its backends, in its order."""
    return RoutedEndpoint(mode, build_backends(hf_token=hf_token, provider=provider, timeout=timeout))


__all__ = [
    "Endpoint",
    "EndpointError",
    "HostedEndpoint",
    "LocalEndpoint",
    "ModelUnavailable",
    "RoutedEndpoint",
    "StopSignal",
    "Stopped",
    "build_backends",
    "build_endpoint",
]
