"""Which device the runtime runs on, in which precision, and how much memory its models may take."""

from __future__ import annotations

import os
from dataclasses import dataclass

from models_local.handlers.base import Device


def is_gpu(device: Device) -> bool:
    """cuda and mps load in half precision; so sizes are counted at 2 bytes per float there."""
    return device.name.split(":")[0] in ("cuda", "mps")


@dataclass(frozen=True)
class CpuThreads:
    """torch's CPU threads for one call and for a batch of calls (a server's setting). A batch may
    take more: its callers wait for it, so the HTTP side that a lone call leaves a core for is idle.
    torch keeps the count per thread (a thread takes the process's count at its first operation),
    so every run sets its own."""

    one: int
    batch: int

    def use(self, calls: int) -> None:
        import torch

        torch.set_num_threads(self.batch if calls > 1 else self.one)


def pick_device(name: str | None = None) -> Device:
    """cuda, then mps, then cpu (or `name`, e.g. from HUGGINGGPT_DEVICE); fp16 on a GPU."""
    import torch

    name = name or os.environ.get("HUGGINGGPT_DEVICE") or None
    if name is None:
        if torch.cuda.is_available():
            name = "cuda"
        elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            name = "mps"
        else:
            name = "cpu"
    gpu = name.split(":")[0] in ("cuda", "mps")
    return Device(name=name, dtype=torch.float16 if gpu else torch.float32)


def default_budget(device: Device) -> int:
    """HUGGINGGPT_LOCAL_MEMORY_GB, else most of the GPU's memory, else half of the RAM."""
    env = os.environ.get("HUGGINGGPT_LOCAL_MEMORY_GB")
    if env:
        return int(float(env) * 2**30)
    if device.name.startswith("cuda"):
        import torch

        return int(torch.cuda.get_device_properties(torch.device(device.name)).total_memory * 0.85)
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 8 * 2**30
    return int(ram * 0.5)


def free_memory(device: Device) -> None:
    """Give dropped models' memory back: collect them, and on cuda release the cached blocks."""
    import gc

    gc.collect()
    if device.name.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
