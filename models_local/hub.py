"""Where a model's files are: a local folder, the HF cache, or the Hub (downloaded once sized).

huggingface_hub honours HF_HUB_OFFLINE and the HF cache, so a hub model and a local folder then go
through the same loading code.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from models_local.handlers.base import RuntimeUnsupported
from models_local.sizing import WEIGHT_SUFFIXES, folder_size, weight_files

# Files no loader here reads: other frameworks' weights and exports.
IGNORE = [
    "*.h5",
    "*.msgpack",
    "*.onnx",
    "*.onnx_data",
    "*.ot",
    "*.tflite",
    "*.gguf",
    "*.mlmodel",
    "*.mlpackage/*",
    "onnx/*",
    "openvino/*",
    "coreml/*",
    "tf_model*",
    "flax_model*",
    "rust_model*",
    "*.tar.gz",
    "*.zip",
    "*.mp4",
    "*.gif",
    "*.png",
    "*.jpg",
]


def local_folder(model: str) -> Path | None:
    """A local folder, or a hub id already in the HF cache; None when only the network has it."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, local_files_only=True))
    except (OSError, ValueError):  # not cached (LocalEntryNotFoundError), or not a valid repo id
        return None


# Told how a model's files come: ("download", bytes written so far, bytes in all); the runtime also
# calls it with ("load", 0, 0) as the weights start loading.
Progress = Callable[[str, int, int], None]


def locate(
    model: str, *, half: bool, check_fits: Callable[[str, int], None], progress: Progress | None = None
) -> tuple[Path, int | None]:
    """(local folder, estimated loaded bytes). A hub model is sized from its file listing and passed
    to `check_fits` (which raises to refuse it) before the download starts; `progress` is told the
    bytes written as they come."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve(), _folder_size(model, path, half)
    from huggingface_hub import constants, snapshot_download

    try:
        if constants.HF_HUB_OFFLINE:
            folder = Path(snapshot_download(model, local_files_only=True))
            return folder, _folder_size(model, folder, half)
        listing = snapshot_download(model, dry_run=True, ignore_patterns=IGNORE)
        files = [f.filename for f in listing]
        weights = set(weight_files(files))
        skipped = [f for f in files if f.endswith(WEIGHT_SUFFIXES) and f not in weights]
        estimate = sum(f.file_size or 0 for f in listing if f.filename in weights) or None
        if estimate and half and not any(".fp16." in w or "-fp16" in w for w in weights):
            estimate //= 2  # stored float32, loaded float16
        check_fits(model, estimate or 0)
        fetched = sum(f.file_size or 0 for f in listing if f.will_download and f.filename not in skipped)
        bars = {"tqdm_class": _reporting_bar(progress, fetched)} if progress and fetched else {}
        folder = Path(snapshot_download(model, ignore_patterns=IGNORE + skipped, **bars))
    except RuntimeUnsupported:
        raise
    except Exception as exc:  # missing repo, gated, offline and not cached, bad id ...
        raise RuntimeUnsupported(
            f"cannot get {model!r} from the Hugging Face Hub or its cache: {exc}"
        ) from exc
    return folder, _folder_size(model, folder, half) or estimate


def _folder_size(model: str, folder: Path, half: bool) -> int | None:
    try:
        return folder_size(folder, half=half)
    except (OSError, ValueError) as exc:
        raise RuntimeUnsupported(f"cannot read the weights of {model!r}: {exc}") from exc


def _reporting_bar(progress: Progress, total: int) -> Any:
    """A tqdm class for snapshot_download that draws nothing and tells `progress` the bytes written.

    snapshot_download makes three bars of it (one per file count, bytes received, bytes written);
    only the bytes-written one, which its name tells apart, counts. Its own total grows as each
    file starts, so the listing's total is the one reported."""
    from huggingface_hub.utils import tqdm

    lock = threading.Lock()
    written = [0]

    class ReportingBar(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.counts = kwargs.get("name") == "huggingface_hub.snapshot_download"
            super().__init__(*args, **{**kwargs, "disable": True})

        def update(self, n: float | None = 1) -> bool | None:
            if self.counts and n:
                with lock:  # files come in parallel: their counts go out in order
                    written[0] += int(n)
                    progress("download", min(written[0], total), total)
            return super().update(n)

    return ReportingBar
