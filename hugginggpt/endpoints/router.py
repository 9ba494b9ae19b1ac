"""Routing between backends in the order an inference mode gives (hugginggpt.modes)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from hugginggpt.catalog import ModelCard
from hugginggpt.endpoints.base import (
    Call,
    Endpoint,
    EndpointError,
    Footprint,
    ModelUnavailable,
    Result,
    Stopped,
)
from hugginggpt.modes import backends_of

TOOL_BACKENDS = ("space", "mcp")  # a catalog tool runs where it is, whatever the mode


class RoutedEndpoint(Endpoint):
    """Tries the backends the policy allows, in order: the first that can run the model and
    succeeds answers. A backend that cannot run the model, or fails, hands over to the next."""

    name = "routed"

    def __init__(self, policy: str, available: Mapping[str, Endpoint]) -> None:
        """`available`: backends by name; the mode `policy` picks and orders those it uses."""
        self.backends: list[Endpoint] = [available[b] for b in backends_of(policy) if b in available]
        if not self.backends:
            raise ValueError(f"policy {policy!r} was given no backend to use")
        self.tools: list[Endpoint] = [available[b] for b in TOOL_BACKENDS if b in available]
        self.policy = policy
        self.name = policy

    def describe(self) -> str:
        return f"{self.policy}: " + ", then ".join(b.describe() for b in self.backends)

    def _for(self, model: ModelCard) -> list[Endpoint]:
        return self.tools if model.tool is not None else self.backends

    def can_run(self, model: ModelCard) -> bool:
        return any(b.can_run(model) for b in self._for(model))

    def warm(self, task: str, model: ModelCard) -> bool:
        """The backend the call would try first warms it."""
        first = next((b for b in self._for(model) if b.can_run(model)), None)
        return first is not None and first.warm(task, model)

    def footprint(self, model: ModelCard) -> Footprint:
        """The worst footprint of the backends the call may fall back to, so that a limit screened
        before the run (hugginggpt.costs.limits) holds on every route the task can take: a model that
        would break one on a fallback is not offered. Where: the first backend that would run it on
        this machine (size limits apply there), else the first that can run it."""
        able = [b for b in self._for(model) if b.can_run(model)] or self.backends[:1]
        prints = [b.footprint(model) for b in able]
        first = next((p for p in prints if p.where.startswith("local")), prints[0])
        return replace(
            first,
            download_bytes=_worst(p.download_bytes for p in prints),
            memory_bytes=_worst(p.memory_bytes for p in prints),
            size_bytes=first.size_bytes if len(prints) == 1 else _worst(p.size_bytes for p in prints),
        )

    def run(self, task: str, model: ModelCard, inputs: dict[str, Any], call: Call) -> Result:
        errors: list[tuple[str, Exception]] = []
        for backend in self._for(model):
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


def _worst(sizes: Iterable[int | None]) -> int | None:
    """The largest size; None (not known) outweighs any known one."""
    known = []
    for size in sizes:
        if size is None:
            return None
        known.append(size)
    return max(known)
