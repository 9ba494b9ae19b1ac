"""The runtime behind models_local.run: find a model's files, size them, load once, cache, call.

A hub id is first turned into a local snapshot folder (huggingface_hub, honouring HF_HUB_OFFLINE and
the HF cache), so a hub model and a local folder go through the same loading code. Before anything is
loaded, the weights are sized from their safetensors headers (or file sizes); a model that cannot fit
the memory budget is refused. Loaded models live in an LRU cache bounded by that budget.
"""

from __future__ import annotations

import gc
import json
import os
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .handlers import HANDLERS
from .handlers.base import Device, Handler, Outputs, RuntimeUnsupported


class ModelTooLarge(RuntimeUnsupported):
    """Refused before loading: the model's weights do not fit the memory budget."""


# Library names a model card may carry, mapped to the handler library that serves them.
LIBRARY_ALIASES = {
    "transformers": "transformers",
    "sentence-transformers": "transformers",
    "diffusers": "diffusers",
    "sklearn": "sklearn",
    "scikit-learn": "sklearn",
    "skops": "sklearn",
    "joblib": "sklearn",
}

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
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".joblib", ".pkl", ".skops")
# Files no loader here reads: other frameworks' weights and exports.
_IGNORE = [
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


# ---- sizing weights before loading ---------------------------------------------------------------


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


def _weight_files(files: list[str]) -> list[str]:
    """The weight files a loader would read, out of a repo's or folder's file list.

    safetensors win over pickles; a diffusers repo's root-level single-file checkpoints and
    precision variants (x.fp16.safetensors beside x.safetensors) are not counted twice.
    """
    weights = [f for f in files if f.endswith(_WEIGHT_SUFFIXES) and "/." not in f and not f.startswith(".")]
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
    weights = _weight_files(files)
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


# ---- process-wide state during loads ------------------------------------------------------------


class _LoadGate:
    """Loads run one at a time, process-wide; half precision loads also wait for float32 calls.

    Building a model changes process-wide state, not per-thread state: accelerate's
    init_empty_weights (diffusers builds under it) patches nn.Module so that every new parameter goes
    on the meta device, and transformers and diffusers build under torch.set_default_dtype(load
    dtype). A load overlapping another one gets meta tensors ("Cannot copy out of meta tensor") or
    float16 weights, and two restores can leave the whole process in float16 (black images, NaN
    scores); diffusers does not restore the dtype at all when building fails, so the gate does.
    Float32 calls overlap float32 loads (nothing they see changes) but wait while a float16 load
    runs, whose default dtype would reach their tensors. A loader or a call must not load through
    a Runtime.
    """

    def __init__(self) -> None:
        self._loading = threading.Lock()
        self._cond = threading.Condition()
        self._calls = 0  # float32 calls running
        self._half = 0  # half precision loads running or waiting: they go first, no starvation

    @contextmanager
    def hold(self, dtype: Any) -> Iterator[None]:
        import torch

        with self._loading:
            half = dtype != torch.float32 or torch.get_default_dtype() != torch.float32
            if half:
                with self._cond:
                    self._half += 1
                    self._cond.wait_for(lambda: self._calls == 0)
            before = torch.get_default_dtype()
            try:
                yield
            finally:
                if torch.get_default_dtype() != before:
                    torch.set_default_dtype(before)
                if half:
                    with self._cond:
                        self._half -= 1
                        self._cond.notify_all()

    @contextmanager
    def calling(self, dtype: Any) -> Iterator[None]:
        """Around a call: float32 calls wait for half precision loads; half precision calls (a GPU's,
        where every load is float16 too) do not wait for anything."""
        import torch

        if dtype != torch.float32:
            yield
            return
        with self._cond:
            self._cond.wait_for(lambda: self._half == 0)
            self._calls += 1
        try:
            yield
        finally:
            with self._cond:
                self._calls -= 1
                self._cond.notify_all()


_LOAD_GATE = _LoadGate()
_SEED_LOCK = threading.Lock()


@contextmanager
def _seeded(seed: int | None) -> Iterator[None]:
    """torch's generators (CPU and every GPU) seeded for one call; seeded calls take turns."""
    if seed is None:
        yield
        return
    import torch

    with _SEED_LOCK:
        torch.manual_seed(seed)
        yield


def loading(dtype: Any = None) -> Any:
    """Around a from_pretrained outside a Runtime (the local controller LLM): it takes its turn with
    the runtime's loads. dtype None means not known beforehand ("auto"), so maybe half precision."""
    return _LOAD_GATE.hold(dtype)


# ---- the runtime ---------------------------------------------------------------------------------


@dataclass
class _Entry:
    obj: Any
    size: int
    call_lock: threading.Lock  # one call at a time per model: tokenizers are not thread-safe
    users: int = 0  # requests between lookup and the end of their call: never evicted meanwhile


class Runtime:
    """Loads models on first use, keeps them in an LRU cache bounded by a memory budget."""

    def __init__(
        self,
        *,
        memory_budget_bytes: int | None = None,
        device: str | None = None,
        handlers: Mapping[str, Handler] | None = None,
    ) -> None:
        self.device = pick_device(device)
        self.budget = memory_budget_bytes if memory_budget_bytes is not None else default_budget(self.device)
        self.handlers = handlers if handlers is not None else HANDLERS
        self._cache: OrderedDict[tuple[Any, str], _Entry] = OrderedDict()  # (loader, model) -> entry
        self._reserved = 0  # bytes promised to loads in progress
        self._lock = threading.Lock()
        self._load_locks: dict[tuple[Any, str], threading.Lock] = {}
        self.loads = 0  # how many times a model was actually loaded (tests and benchmarks read it)

    # -- what is served --
    @property
    def half(self) -> bool:
        return self.device.name.split(":")[0] in ("cuda", "mps")

    def handler(self, task: str, library: str | None = None) -> Handler:
        handler = self.handlers.get(task)
        if handler is None:
            raise RuntimeUnsupported(f"the local runtime has no handler for task {task!r}")
        if library and LIBRARY_ALIASES.get(library.lower(), library.lower()) != handler.library:
            raise RuntimeUnsupported(
                f"task {task!r} runs {handler.library} models locally; this model is a {library} model"
            )
        return handler

    def can_run(
        self, task: str, model: str, *, library: str | None = None, size_bytes: int | None = None
    ) -> bool:
        """Cheap: handler, library and size checks; reads at most safetensors headers, loads nothing."""
        try:
            handler = self.handler(task, library)
        except RuntimeUnsupported:
            return False
        if size_bytes is None and handler.library != "builtin":
            folder = self._local_folder(model)
            try:
                size_bytes = folder_size(folder, half=self.half) if folder else None
            except (OSError, ValueError):  # unreadable weights (e.g. Git LFS pointers): cannot load
                return False
        return size_bytes is None or size_bytes <= self.budget

    # -- running --
    def run(
        self,
        task: str,
        model: str,
        inputs: Mapping[str, str],
        out_dir: str | Path,
        *,
        stop: Any = None,
        seed: int | None = None,
    ) -> list[dict]:
        """`stop` (anything with is_set()) ends a long call between steps with Stopped.

        `seed` makes a sampling model (diffusion, VITS, SpeechT5) repeat itself: torch's random
        generators are seeded just before the call, once the model is loaded. The generators are
        process-wide, so seeded calls run one at a time; an unseeded call running meanwhile would
        still draw from them."""
        handler = self.handler(task)
        entry = self._get(task, model, handler)  # counted as a user of the entry
        try:
            outputs = Outputs(Path(out_dir).resolve(), stop=stop)
            with entry.call_lock, _LOAD_GATE.calling(self.device.dtype), _seeded(seed):
                outputs.check_stop()  # stopped while waiting for the model: do not start
                handler.call(entry.obj, dict(inputs), outputs)
        finally:
            with self._lock:
                entry.users -= 1
                evicted = self._evict_for(0)  # loads made while it was in use may have gone over
            if evicted:
                self._free()
        return outputs.artifacts

    def cached(self) -> list[str]:
        """Models in the cache, least recently used first."""
        with self._lock:
            return [model for _, model in self._cache]

    @property
    def used(self) -> int:
        with self._lock:
            return sum(e.size for e in self._cache.values())

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
        self._free()

    def drop(self, model: str) -> bool:
        """Unload `model` (for every task it was loaded for) unless a call is using it; True if
        something was unloaded. A server that decides itself which models stay resident calls it."""
        if Path(model).expanduser().is_dir():
            model = str(Path(model).expanduser().resolve())
        with self._lock:
            keys = [k for k, e in self._cache.items() if k[1] == model and e.users == 0]
            for key in keys:
                del self._cache[key]
        if keys:
            self._free()
        return bool(keys)

    def _take_cached(self, key: tuple) -> _Entry | None:
        """The cached entry for `key`, marked in use and most recently used (hold self._lock)."""
        entry = self._cache.get(key)
        if entry is not None:
            self._cache.move_to_end(key)
            entry.users += 1
        return entry

    def _get(self, task: str, model: str, handler: Handler) -> _Entry:
        # Tasks that share a loader function (summarization, translation, ...) share one loaded copy.
        if Path(model).expanduser().is_dir():
            model = str(Path(model).expanduser().resolve())  # one entry per folder, however it is spelled
        key = (handler.load, model)
        with self._lock:
            entry = self._take_cached(key)
            if entry is not None:
                return entry
            load_lock = self._load_locks.setdefault(key, threading.Lock())
        with load_lock:  # concurrent first uses wait here; the first one loads
            with self._lock:
                entry = self._take_cached(key)
                if entry is not None:
                    return entry
            # "builtin" handlers (e.g. an edge detector) have no files: the name is all they need
            folder, estimate = (model, 0) if handler.library == "builtin" else self._locate(model)
            reserved = self._reserve(estimate or 0, model)
            try:
                try:
                    with _LOAD_GATE.hold(self.device.dtype):
                        obj = handler.load(str(folder), self.device)
                except RuntimeUnsupported:
                    raise
                except Exception as exc:  # unknown architecture, missing files, ... : not servable here
                    raise RuntimeUnsupported(
                        f"cannot load {model!r} for {task}: {type(exc).__name__}: {exc}"
                    ) from exc
                with self._lock:
                    self.loads += 1
                size = loaded_size(obj) or estimate or 0
                if size > self.budget:
                    raise ModelTooLarge(
                        f"{model} takes {size / 2**20:.0f} MiB once loaded, over the "
                        f"{self.budget / 2**20:.0f} MiB budget"
                    )
                entry = _Entry(obj, size, threading.Lock(), users=1)
                with self._lock:
                    self._reserved -= reserved
                    reserved = 0
                    evicted = self._evict_for(size)
                    self._cache[key] = entry
                if evicted:
                    self._free()
                return entry
            finally:
                if reserved:
                    with self._lock:
                        self._reserved -= reserved

    def _check_fits(self, model: str, size: int) -> None:
        if size > self.budget:
            raise ModelTooLarge(
                f"{model} needs about {size / 2**20:.0f} MiB, over the "
                f"{self.budget / 2**20:.0f} MiB budget of the local runtime"
            )

    def _reserve(self, size: int, model: str) -> int:
        self._check_fits(model, size)
        with self._lock:
            evicted = self._evict_for(size)
            self._reserved += size
        if evicted:
            self._free()  # outside the lock: collecting takes a while
        return size

    def _evict_for(self, size: int) -> bool:
        """Drop least recently used models until `size` more bytes fit. Caller holds self._lock.

        Models in use stay: dropping one frees nothing until its call ends, and the next request
        for it would load a second copy. Until they are done the cache may go over the budget.
        """
        evicted = False
        for key in list(self._cache):
            if sum(e.size for e in self._cache.values()) + self._reserved + size <= self.budget:
                break
            if self._cache[key].users == 0:
                del self._cache[key]
                evicted = True
        return evicted

    def _free(self) -> None:
        gc.collect()
        if self.device.name.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()

    # -- finding files --
    @staticmethod
    def _local_folder(model: str) -> Path | None:
        path = Path(model).expanduser()
        if path.is_dir():
            return path.resolve()
        try:  # a hub id already in the HF cache: size it without the network
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(model, local_files_only=True))
        except (OSError, ValueError):  # not cached (LocalEntryNotFoundError), or not a valid repo id
            return None

    def _locate(self, model: str) -> tuple[Path, int | None]:
        """(local folder, estimated loaded bytes); downloads a hub model only after sizing it."""
        path = Path(model).expanduser()
        if path.is_dir():
            return path.resolve(), self._folder_size(model, path)
        from huggingface_hub import constants, snapshot_download

        try:
            if constants.HF_HUB_OFFLINE:
                folder = Path(snapshot_download(model, local_files_only=True))
                return folder, self._folder_size(model, folder)
            listing = snapshot_download(model, dry_run=True, ignore_patterns=_IGNORE)
            files = [f.filename for f in listing]
            weights = set(_weight_files(files))
            skipped = [f for f in files if f.endswith(_WEIGHT_SUFFIXES) and f not in weights]
            estimate = sum(f.file_size or 0 for f in listing if f.filename in weights) or None
            if estimate and self.half and not any(".fp16." in w or "-fp16" in w for w in weights):
                estimate //= 2  # stored float32, loaded float16
            self._check_fits(model, estimate or 0)  # refused before the download starts
            folder = Path(snapshot_download(model, ignore_patterns=_IGNORE + skipped))
        except RuntimeUnsupported:
            raise
        except Exception as exc:  # missing repo, gated, offline and not cached, bad id ...
            raise RuntimeUnsupported(
                f"cannot get {model!r} from the Hugging Face Hub or its cache: {exc}"
            ) from exc
        return folder, self._folder_size(model, folder) or estimate

    def _folder_size(self, model: str, folder: Path) -> int | None:
        try:
            return folder_size(folder, half=self.half)
        except (OSError, ValueError) as exc:
            raise RuntimeUnsupported(f"cannot read the weights of {model!r}: {exc}") from exc
