"""Routing between backends in the order an inference mode gives (hugginggpt.modes)."""

from __future__ import annotations

from typing import Any

from ..catalog import ModelCard
from ..modes import backends_of
from .base import Call, Endpoint, EndpointError, Footprint, ModelUnavailable, Result, Stopped


class RoutedEndpoint(Endpoint):
    """Tries the backends the policy allows, in order: the first that can run the model and
    succeeds answers. A backend that cannot run the model, or fails, hands over to the next."""

    name = "routed"

    def __init__(self, policy: str, available: dict[str, Endpoint]) -> None:
        """`available`: backends by name; the mode `policy` picks and orders those it uses."""
        self.backends: list[Endpoint] = [available[b] for b in backends_of(policy) if b in available]
        if not self.backends:
            raise ValueError(f"policy {policy!r} was given no backend to use")
        self.policy = policy
        self.name = policy

    def describe(self) -> str:
        return f"{self.policy}: " + ", then ".join(b.describe() for b in self.backends)

    def can_run(self, model: ModelCard) -> bool:
        return any(b.can_run(model) for b in self.backends)

    def warm(self, task: str, model: ModelCard) -> bool:
        """The backend the call would try first warms it."""
        first = next((b for b in self.backends if b.can_run(model)), None)
        return first is not None and first.warm(task, model)

    def footprint(self, model: ModelCard) -> Footprint:
        """The footprint where the model would run: the first backend that can run it."""
        backend = next((b for b in self.backends if b.can_run(model)), self.backends[0])
        return backend.footprint(model)

    def run(
        self,
        task: str,
        model: ModelCard,
        inputs: dict[str, Any],
        call: Call,
    ) -> Result:
        errors: list[tuple[str, Exception]] = []
        for backend in self.backends:
            if not backend.can_run(model):
                errors.append((backend.name, ModelUnavailable(f"cannot run {model.id}")))
                continue
            if call.stop is not None and call.stop.is_set():
                raise Stopped(f"{model.id}: stopped")  # no fallback for a stopped call
            try:
                return backend.run(task, model, inputs, call)
            except Stopped:
                raise
            except EndpointError as exc:
                errors.append((backend.name, exc))
            except Exception as exc:  # noqa: BLE001 (a backend bug must not stop the fallback either)
                errors.append((backend.name, EndpointError(f"{type(exc).__name__}: {exc}")))
        # Every backend refused: the model is unavailable. Any real failure: report them all.
        refused = all(isinstance(e, ModelUnavailable) for _, e in errors)
        message = "; ".join(f"{name}: {e}" for name, e in errors)
        raise (ModelUnavailable if refused else EndpointError)(message)
