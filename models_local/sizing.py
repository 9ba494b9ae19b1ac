"""How much memory a model takes: estimated from its files before loading, measured once loaded.

Weights are sized from safetensors headers (or file sizes for pickles), so a model too large for the
budget is refused before it is downloaded or loaded.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Bytes per element of each safetensors dtype.
_DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
}
_FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".joblib", ".pkl", ".skops")


def mib(size: int) -> str:
    """A byte count for messages and logs."""
    return f"{size / 2**20:.0f} MiB"


def safetensors_bytes(path: Path, *, half: bool) -> int:
    """Memory the tensors of one .safetensors file take once loaded, read from its header only.

    Float tensors are counted at 2 bytes when the runtime loads in half precision and at 4 bytes
    otherwise (loaders here cast floats to the device dtype); other tensors keep their size.
    Raises ValueError for a file that is no safetensors file: a Git LFS pointer (a repo cloned
    without git-lfs) or a cut-off download. Its first 8 bytes would otherwise ask for exabytes.
    """
    size = path.stat().st_size
    with open(path, "rb") as f:
        first = f.read(8)
        (n,) = struct.unpack("<Q", first) if len(first) == 8 else (size,)
        if n > size - 8:
            raise ValueError(f"{path} is not a safetensors file (a Git LFS pointer, or cut short?)")
        try:
            header = json.loads(f.read(n))
            total = 0
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                numel = 1
                for dim in info["shape"]:
                    numel *= dim
                dtype = info["dtype"]
                per = (2 if half else 4) if dtype in _FLOAT_DTYPES else _DTYPE_BYTES.get(dtype, 4)
                total += numel * per
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path} has no readable safetensors header ({exc})") from None
    return total


def weight_files(files: list[str]) -> list[str]:
    """The weight files a loader would read, out of a repo's or folder's file list.

    safetensors win over pickles; a diffusers repo's root-level single-file checkpoints and
    precision variants (x.fp16.safetensors beside x.safetensors) are not counted twice.
    """
    weights = [f for f in files if f.endswith(WEIGHT_SUFFIXES) and "/." not in f and not f.startswith(".")]
    if "model_index.json" in files:  # diffusers: components live in subfolders
        weights = [f for f in weights if "/" in f]
    chosen: list[str] = []
    by_dir: dict[str, list[str]] = {}
    for f in weights:
        by_dir.setdefault(os.path.dirname(f), []).append(f)
    for group in by_dir.values():
        safe = [f for f in group if f.endswith(".safetensors")]
        group = safe or group
        plain = [f for f in group if len(Path(f).name.split(".")) <= 2 or "-of-" in f]
        chosen += plain or group
    return chosen


def folder_size(folder: Path, *, half: bool) -> int | None:
    """Loaded size of a local model folder, or None when it holds no weight files."""
    files = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
    weights = weight_files(files)
    if not weights:
        return None
    total = 0
    for rel in weights:
        path = folder / rel
        if rel.endswith(".safetensors"):
            total += safetensors_bytes(path, half=half)
        else:  # pickled weights: assume float32 on disk
            total += path.stat().st_size // (2 if half and rel.endswith((".bin", ".pt", ".pth")) else 1)
    return total


def loaded_size(obj: Any) -> int:
    """Bytes of the torch parameters and buffers reachable from a loaded object (0 if none)."""
    import torch

    seen: set[int] = set()
    modules: list[Any] = []

    def visit(value: Any, depth: int) -> None:
        if id(value) in seen or depth > 3:
            return
        seen.add(id(value))
        if isinstance(value, torch.nn.Module):
            modules.append(value)
        elif isinstance(value, Mapping):
            for v in value.values():
                visit(v, depth + 1)
        elif isinstance(value, (list, tuple)):
            for v in value:
                visit(v, depth + 1)
        elif hasattr(value, "components") and isinstance(value.components, Mapping):  # diffusers
            visit(value.components, depth + 1)
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            visit(vars(value), depth + 1)

    visit(obj, 0)
    tensors: dict[int, int] = {}
    for module in modules:
        for t in [*module.parameters(), *module.buffers()]:
            tensors[id(t)] = t.numel() * t.element_size()
    return sum(tensors.values())
