"""Routing between backends: local, hosted, or hybrid (local first, hosted when local can't)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..artifacts import Artifact
from ..catalog import ModelCard
from .base import Endpoint, EndpointError, ModelUnavailable, Stopped, StopSignal

POLICIES = ("local", "hosted", "hybrid")


class RoutedEndpoint(Endpoint):
    """Tries the backends the policy allows, in order: the first that can run the model and
    succeeds answers. A backend that cannot run the model, or fails, hands over to the next."""

    name = "routed"

    def __init__(self, policy: str, *, local: Endpoint | None = None, hosted: Endpoint | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown inference policy {policy!r}: use one of {', '.join(POLICIES)}")
        wanted = {"local": [local], "hosted": [hosted], "hybrid": [local, hosted]}[policy]
        self.backends: list[Endpoint] = [b for b in wanted if b is not None]
        if not self.backends:
            raise ValueError(f"policy {policy!r} was given no backend to use")
        self.policy = policy
        self.name = policy

    def describe(self) -> str:
        return f"{self.policy}: " + ", then ".join(b.describe() for b in self.backends)

    def can_run(self, model: ModelCard) -> bool:
        return any(b.can_run(model) for b in self.backends)

    def run(
        self,
        task: str,
        model: ModelCard,
        inputs: dict[str, Any],
        out_dir: Path,
        *,
        stop: StopSignal | None = None,
    ) -> list[Artifact]:
        errors: list[tuple[str, Exception]] = []
        for backend in self.backends:
            if not backend.can_run(model):
                errors.append((backend.name, ModelUnavailable(f"cannot run {model.id}")))
                continue
            if stop is not None and stop.is_set():
                raise Stopped(f"{model.id}: stopped")  # no fallback for a stopped call
            try:
                return backend.run(task, model, inputs, out_dir, stop=stop)
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
