"""Where models run. The pipeline talks to every endpoint through `Endpoint`."""

from .base import Endpoint, EndpointError, ModelUnavailable

__all__ = ["Endpoint", "EndpointError", "ModelUnavailable"]
