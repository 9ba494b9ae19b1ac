"""What a model takes before it runs, without loading it: the files of a local folder or of the HF
cache (nothing to download), and which files of a Hub listing the runtime would download."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from models_local import hub
from models_local.sizing import WEIGHT_SUFFIXES, folder_size, weight_files


@dataclass(frozen=True)
class Footprint:
    download_bytes: int | None  # None: not here (the Hub would have to be asked)
    memory_bytes: int | None  # loaded on this device, in its precision
    weights_bytes: int | None  # the weight files on disk (what a catalog stores as size_bytes)


@dataclass(frozen=True)
class Listed:
    """The files the runtime would download out of a repo listing, and the weights among them."""

    download_bytes: int
    weights_bytes: int
    stored_half: bool  # weights stored in 16 bits (an fp16 variant)


def listed(files: dict[str, int]) -> Listed:
    """`files`: a repo's file names and sizes (the Hub's listing)."""
    kept = {f: n for f, n in files.items() if not any(fnmatch.fnmatch(f, p) for p in hub.IGNORE)}
    weights = set(weight_files(list(kept)))
    skipped = {f for f in kept if f.endswith(WEIGHT_SUFFIXES) and f not in weights}
    return Listed(
        download_bytes=sum(n for f, n in kept.items() if f not in skipped),
        weights_bytes=sum(kept[f] for f in weights),
        stored_half=any(".fp16." in w or "-fp16" in w for w in weights),
    )


def local_footprint(model: str, *, half: bool) -> Footprint:
    """A folder or a cached hub id: nothing to download, sized from its files; else all None."""
    folder = hub.local_folder(model)
    if folder is None:
        return Footprint(None, None, None)
    try:
        loaded = folder_size(folder, half=half)
    except (OSError, ValueError):  # unreadable weights: the runtime refuses them anyway
        loaded = None
    files = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
    on_disk = sum((folder / f).stat().st_size for f in weight_files(files))
    return Footprint(0, loaded, on_disk or None)
