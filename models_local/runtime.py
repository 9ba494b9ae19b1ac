"""The runtime behind models_local.run: find a model's files, size them, load once, cache, call.

Each part has its module: device.py (device, precision, budget), sizing.py (weight sizes),
hub.py (where the files are), gate.py (one load at a time, process-wide), cache.py (the LRU cache).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from models_local import hub, telemetry
from models_local.batching import WINDOW_S, Batcher, Call
from models_local.cache import Entry, ModelCache, ModelTooLarge
from models_local.device import CpuThreads, default_budget, free_memory, is_gpu, pick_device
from models_local.gate import LOAD_GATE
from models_local.handlers import HANDLERS
from models_local.handlers.base import Handler, Outputs, RuntimeUnsupported
from models_local.sizing import folder_size, loaded_size, mib

log = logging.getLogger(__name__)

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


class Runtime:
    """Loads models on first use, keeps them in an LRU cache bounded by a memory budget."""

    def __init__(
        self,
        *,
        memory_budget_bytes: int | None = None,
        device: str | None = None,
        handlers: Mapping[str, Handler] | None = None,
        batch_window_s: float = WINDOW_S,
        cpu_threads: CpuThreads | None = None,
    ) -> None:
        """`batch_window_s`: how long concurrent calls of a model under load wait for each other to
        run as one batch (batching.py); 0 runs every call alone. `cpu_threads`: torch's threads for
        a lone call and for a batch on the CPU (None: torch's own count for both)."""
        self.device = pick_device(device)
        self.cpu_threads = None if is_gpu(self.device) else cpu_threads
        budget = memory_budget_bytes if memory_budget_bytes is not None else default_budget(self.device)
        self.handlers = handlers if handlers is not None else HANDLERS
        self._cache = ModelCache(budget, lambda: free_memory(self.device))  # key: (loader, model)
        self._count_lock = threading.Lock()
        self.loads = 0  # how many times a model was actually loaded (tests and benchmarks read it)
        self.batcher = Batcher(batch_window_s) if batch_window_s > 0 else None
        self._in_flight: Counter[tuple[str, str]] = Counter()  # calls in run() by (task, model)

    # -- what is served --
    @property
    def budget(self) -> int:
        return self._cache.budget

    @property
    def half(self) -> bool:
        return is_gpu(self.device)

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
        except RuntimeUnsupported as exc:
            log.debug("cannot run %s for %s: %s", model, task, exc)  # asked per candidate: not INFO
            return False
        if size_bytes is None and handler.library != "builtin":
            folder = hub.local_folder(model)
            try:
                size_bytes = folder_size(folder, half=self.half) if folder else None
            except (OSError, ValueError) as exc:  # unreadable weights (e.g. Git LFS pointers): cannot load
                log.debug("cannot run %s for %s: %s", model, task, exc)
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
        progress: hub.Progress | None = None,
        batched: Callable[[int], None] | None = None,
    ) -> list[dict]:
        """`stop` (anything with is_set()) ends a long call between steps with Stopped. `progress`
        is told how a download goes and when the weights start loading (hub.Progress).

        `seed` makes a sampling model (diffusion, VITS, SpeechT5) repeat itself; it is the same as
        an input "seed", which the handlers read (handlers.base.seeded, diffusion.seeded).

        `batched` is told how many calls ran together with this one (1: alone), once it has run."""
        if seed is not None:
            inputs = {**inputs, "seed": str(seed)}
        with self._count_lock:
            self._in_flight[task, model] += 1  # also while it waits for a load: a batch to be
        try:
            return self._run(task, model, inputs, out_dir, stop, progress, batched)
        finally:
            with self._count_lock:
                self._in_flight[task, model] -= 1
                if not self._in_flight[task, model]:
                    del self._in_flight[task, model]

    def _run(
        self,
        task: str,
        model: str,
        inputs: Mapping[str, str],
        out_dir: str | Path,
        stop: Any,
        progress: hub.Progress | None,
        batched: Callable[[int], None] | None,
    ) -> list[dict]:
        try:
            handler = self.handler(task)
            entry = self._get(task, model, handler, progress)  # counted as a user of the entry
        except RuntimeUnsupported as exc:
            log.info("refused %s for %s: %s", model, task, exc)
            raise
        try:
            outputs = Outputs(Path(out_dir).resolve(), stop=stop)
            attributes = {"hugginggpt.expert.task": task, "hugginggpt.expert.device": self.device.name}
            if handler.batch is not None and self.batcher is not None:
                call = Call(dict(inputs), outputs)
                with self._count_lock:
                    crowded = self._in_flight[task, model] > 1
                self._batched(handler, entry, call, attributes, crowded)
                size = call.batch_size
            else:
                with entry.call_lock, LOAD_GATE.calling(self.device.dtype):
                    outputs.check_stop()  # stopped while waiting for the model: do not start
                    self._threads_for(1)
                    with telemetry.span("run", {**attributes, "hugginggpt.expert.batch_size": 1}):
                        handler.call(entry.obj, dict(inputs), outputs)
                size = 1
        finally:
            self._cache.release(entry)
        if batched is not None:
            batched(size)
        return outputs.artifacts

    def _batched(
        self, handler: Handler, entry: Entry, call: Call, attributes: dict[str, Any], crowded: bool
    ) -> None:
        """`call` in a batch with the concurrent calls of the same loaded model and arguments;
        `crowded`: other calls of the model are in run() (using it, or waiting for its load)."""
        batching = handler.batch
        assert batching is not None and self.batcher is not None
        with telemetry.span("run", attributes) as span:
            try:
                self.batcher.call(
                    (id(entry), batching.key(call.inputs)),
                    call,
                    lock=entry.call_lock,
                    run=lambda calls: self._run_batch(handler, entry.obj, calls),
                    most=batching.most_for(entry.obj),
                    crowded=crowded,
                )
            finally:
                if span is not None:
                    span.set_attribute("hugginggpt.expert.batch_size", call.batch_size)

    def _run_batch(self, handler: Handler, obj: Any, calls: list[Call]) -> None:
        """Holding the model (in the line's worker, or a lone call's own thread): the calls as one
        batch; when the batch fails, each call alone, so that one bad input fails its own call only."""
        assert handler.batch is not None
        with LOAD_GATE.calling(self.device.dtype):
            self._threads_for(len(calls))
            if len(calls) > 1:
                try:
                    handler.batch.call(obj, [c.inputs for c in calls], [c.outputs for c in calls])
                    return
                except Exception as exc:  # Stopped too: every member was stopped, each hears it below
                    log.info(
                        "a batch of %d failed (%s: %s); running its calls one by one",
                        len(calls),
                        type(exc).__name__,
                        exc,
                    )
                self._threads_for(1)
            for c in calls:
                c.outputs.artifacts.clear()  # what the failed batch wrote is not this call's answer
                c.batch_size = 1
                try:
                    c.outputs.check_stop()
                    handler.call(obj, dict(c.inputs), c.outputs)
                except Exception as exc:
                    c.error = exc

    def _threads_for(self, calls: int) -> None:
        if self.cpu_threads is not None:
            self.cpu_threads.use(calls)

    def warm(self, task: str, model: str) -> None:
        """Load `model` for `task` now, as its first call would (the cache may evict others to
        stay within the budget); a model in use or already loaded is left as it is."""
        self._cache.release(self._get(task, model, self.handler(task)))

    def is_loaded(self, model: str) -> bool:
        """Whether `model` is loaded (for some task): its next call skips the load."""
        if Path(model).expanduser().is_dir():
            model = str(Path(model).expanduser().resolve())
        return model in self._cache.names()

    def cached(self) -> list[str]:
        """Models in the cache, least recently used first."""
        return self._cache.names()

    @property
    def used(self) -> int:
        return self._cache.used()

    def clear(self) -> None:
        self._cache.clear()

    def drop(self, model: str) -> bool:
        """Unload `model` (for every task it was loaded for) unless a call is using it; True if
        something was unloaded. A server that decides itself which models stay resident calls it."""
        if Path(model).expanduser().is_dir():
            model = str(Path(model).expanduser().resolve())
        return self._cache.drop(model)

    def _get(self, task: str, model: str, handler: Handler, progress: hub.Progress | None = None) -> Entry:
        # Tasks that share a loader function (summarization, translation, ...) share one loaded copy.
        if Path(model).expanduser().is_dir():
            model = str(Path(model).expanduser().resolve())  # one entry per folder, however it is spelled
        key = (handler.load, model)
        entry = self._cache.take(key)
        if entry is not None:
            return entry
        with self._cache.load_lock(key):  # concurrent first uses wait here; the first one loads
            entry = self._cache.take(key)
            if entry is not None:
                return entry
            # "builtin" handlers (e.g. an edge detector) have no files: the name is all they need
            folder: str | Path
            estimate: int | None
            if handler.library == "builtin":
                folder, estimate = model, 0
            else:
                folder, estimate = hub.locate(
                    model, half=self.half, check_fits=self._cache.check_fits, progress=progress
                )
            reservation = self._cache.reserve(model, estimate or 0)
            try:
                started = time.monotonic()
                if progress is not None:
                    progress("load", 0, 0)
                with telemetry.span(
                    "load", {"hugginggpt.expert.task": task, "hugginggpt.expert.device": self.device.name}
                ):
                    obj = self._load(task, model, folder, handler)
                seconds = time.monotonic() - started
                size = loaded_size(obj) or estimate or 0
                if size > self.budget:
                    raise ModelTooLarge(
                        f"{model} takes {mib(size)} once loaded, over the {mib(self.budget)} budget"
                    )
                log.info(
                    "loaded %s for %s in %.1f s (%s on %s)", model, task, seconds, mib(size), self.device.name
                )
                return self._cache.add(key, Entry(model, obj, size), reservation)
            finally:
                self._cache.unreserve(reservation)  # a no-op once added

    def _load(self, task: str, model: str, folder: Any, handler: Handler) -> Any:
        if handler.library != "builtin":
            _quiet_transformers()
        try:
            with LOAD_GATE.hold(self.device.dtype):
                obj = handler.load(str(folder), self.device)
        except RuntimeUnsupported:
            raise
        except Exception as exc:  # unknown architecture, missing files, ... : not servable here
            raise RuntimeUnsupported(
                f"cannot load {model!r} for {task}: {type(exc).__name__}: {exc}"
            ) from exc
        with self._count_lock:
            self.loads += 1
        return obj


def _quiet_transformers() -> None:
    """When transformers is asked to be quiet (TRANSFORMERS_VERBOSITY=error, as the CLI sets it unless
    --verbose), its weight-loading bars go too: they are noise on a terminal and in a log."""
    if os.environ.get("TRANSFORMERS_VERBOSITY") in ("error", "critical"):
        import transformers.utils.logging

        transformers.utils.logging.disable_progress_bar()
