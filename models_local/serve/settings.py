"""A server's settings, the same for `python -m models_local.serve` and the Ray Serve application."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from models_local.batching import WINDOW_S
from models_local.serve.fair import parse_networks
from models_local.serve.limits import (
    BODY_SECONDS,
    MAX_AUDIO_SECONDS,
    MAX_CONNECTIONS,
    MAX_PER_CLIENT,
    MAX_PIXELS,
    Limits,
)
from models_local.serve.models import ModelTable


@dataclass(frozen=True)
class ServerSettings:
    models_dir: str | None = None  # one folder per model id (DIR/name or DIR/owner/name)
    hub: bool = True  # also serve hub ids through the HF cache (downloads unless HF_HUB_OFFLINE)
    seed: int | None = None  # for requests without parameters.seed: outputs repeat
    memory_gb: float | None = None  # the runtime's budget for resident models (per replica)
    device: str | None = None  # cpu | cuda | cuda:1 | mps (default: the best there is)
    diffusion_steps: int | None = None  # denoising steps (default: the runtime's, 25)
    max_pixels: int = MAX_PIXELS  # an image over this (width x height, from its header) is refused: 413
    max_audio_seconds: float = MAX_AUDIO_SECONDS  # a longer clip is refused: 413
    body_seconds: float = BODY_SECONDS  # a request body that takes longer is refused: 408
    max_connections: int = MAX_CONNECTIONS  # python -m models_local.serve: beyond it, 503 at once
    batch_window_ms: float = WINDOW_S * 1000  # concurrent calls of a model wait this long to batch; 0: off
    max_connections_per_client: int = MAX_PER_CLIENT  # one client's share (0: a quarter); then 503
    trusted_proxies: tuple[str, ...] = ()  # proxies whose X-Forwarded-For names the client
    # torch's threads for CPU work; None: as torch (or Ray, for a replica: its num_cpus) sets them.
    # python -m models_local.serve leaves the HTTP side a core (server_threads()).
    torch_threads: int | None = None
    # torch's threads while a batch of calls runs on the CPU; None: as for one call. python -m
    # models_local.serve gives a batch every core (cpu_cores()): the HTTP side idles while it runs.
    batch_torch_threads: int | None = None

    @classmethod
    def from_mapping(cls, values: dict[str, Any] | None) -> ServerSettings:
        """From a Serve config's `args` (or any mapping); unknown keys are an error."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown server settings: {', '.join(sorted(unknown))}")
        values["trusted_proxies"] = tuple(values.get("trusted_proxies") or ())
        settings = cls(**values)
        parse_networks(settings.trusted_proxies)  # ValueError names a bad entry
        if settings.models_dir is not None and not Path(settings.models_dir).expanduser().is_dir():
            raise ValueError(f"models_dir {settings.models_dir} is not a folder")
        if settings.diffusion_steps is not None and settings.diffusion_steps < 1:
            raise ValueError("diffusion_steps must be at least 1")
        if min(settings.max_pixels, settings.max_audio_seconds, settings.body_seconds) <= 0:
            raise ValueError("max_pixels, max_audio_seconds and body_seconds must be more than 0")
        if not 0 <= settings.batch_window_ms <= 1000:
            raise ValueError("batch_window_ms must be between 0 (no batching) and 1000")
        threads = (settings.torch_threads, settings.batch_torch_threads)
        if any(n is not None and n < 1 for n in threads):
            raise ValueError("torch_threads and batch_torch_threads must be at least 1")
        if settings.max_connections < 1 or settings.max_connections_per_client < 0:
            raise ValueError("max_connections must be at least 1, max_connections_per_client not negative")
        return settings

    def limits(self) -> Limits:
        return Limits(
            max_pixels=self.max_pixels,
            max_audio_seconds=self.max_audio_seconds,
            body_seconds=self.body_seconds,
            max_connections=self.max_connections,
            max_per_client=self.max_connections_per_client,
            trusted_proxies=self.trusted_proxies,
        )

    def table(self) -> ModelTable:
        folder = Path(self.models_dir).expanduser().resolve() if self.models_dir else None
        return ModelTable(folder, hub=self.hub)

    def runtime(self, *, share: float = 1.0) -> Any:
        """A Runtime with these settings; `share` scales the default memory budget (a replica that
        holds half a GPU gets half of it)."""
        from models_local.device import CpuThreads
        from models_local.handlers import diffusion
        from models_local.runtime import Runtime, default_budget, pick_device

        if self.diffusion_steps is not None:
            diffusion.STEPS = self.diffusion_steps
        threads = None
        if self.torch_threads is not None or self.batch_torch_threads is not None:
            import torch

            if self.torch_threads is not None:
                torch.set_num_threads(self.torch_threads)
            if self.batch_torch_threads is not None:
                threads = CpuThreads(one=torch.get_num_threads(), batch=self.batch_torch_threads)
        budget = None
        if self.memory_gb is not None:
            budget = int(self.memory_gb * 2**30)
        elif share < 1.0:
            budget = int(default_budget(pick_device(self.device)) * share)
        return Runtime(
            memory_budget_bytes=budget,
            device=self.device,
            batch_window_s=self.batch_window_ms / 1000,
            cpu_threads=threads,
        )


def cpu_cores() -> int:
    return os.cpu_count() or 2


def server_threads() -> int:
    """torch's threads in a server process: every core but one, which the HTTP side (Python, the
    requests' parsing and encoding) keeps. With all of them, torch's threads and the HTTP threads
    take turns on the same cores: on 2 cores a tiny text-to-image call took 2.5 times as long."""
    return max(1, cpu_cores() - 1)
