"""A server's settings, the same for `python -m models_local.serve` and the Ray Serve application."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .models import ModelTable


@dataclass(frozen=True)
class ServerSettings:
    models_dir: str | None = None  # one folder per model id (DIR/name or DIR/owner/name)
    hub: bool = True  # also serve hub ids through the HF cache (downloads unless HF_HUB_OFFLINE)
    seed: int | None = None  # for requests without parameters.seed: outputs repeat
    memory_gb: float | None = None  # the runtime's budget for resident models (per replica)
    device: str | None = None  # cpu | cuda | cuda:1 | mps (default: the best there is)
    diffusion_steps: int | None = None  # denoising steps (default: the runtime's, 25)

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> ServerSettings:
        """From a Serve config's `args` (or any mapping); unknown keys are an error."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown server settings: {', '.join(sorted(unknown))}")
        settings = cls(**values)
        if settings.models_dir is not None and not Path(settings.models_dir).expanduser().is_dir():
            raise ValueError(f"models_dir {settings.models_dir} is not a folder")
        if settings.diffusion_steps is not None and settings.diffusion_steps < 1:
            raise ValueError("diffusion_steps must be at least 1")
        return settings

    def table(self) -> ModelTable:
        folder = Path(self.models_dir).expanduser().resolve() if self.models_dir else None
        return ModelTable(folder, hub=self.hub)

    def runtime(self, *, share: float = 1.0) -> Any:
        """A Runtime with these settings; `share` scales the default memory budget (a replica that
        holds half a GPU gets half of it)."""
        from ..handlers import diffusion
        from ..runtime import Runtime, default_budget, pick_device

        if self.diffusion_steps is not None:
            diffusion.STEPS = self.diffusion_steps
        budget = None
        if self.memory_gb is not None:
            budget = int(self.memory_gb * 2**30)
        elif share < 1.0:
            budget = int(default_budget(pick_device(self.device)) * share)
        return Runtime(memory_budget_bytes=budget, device=self.device)
