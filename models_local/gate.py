"""The process-wide load gate: model loads one at a time, and float32 calls kept out of half loads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class LoadGate:
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


LOAD_GATE = LoadGate()  # one per process: the state it guards is the process's


def loading(dtype: Any = None) -> Any:
    """Around a from_pretrained outside a Runtime (the local chat model): it takes its turn with
    the runtime's loads. dtype None means not known beforehand ("auto"), so maybe half precision."""
    return LOAD_GATE.hold(dtype)
