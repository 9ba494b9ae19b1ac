"""Loaded models kept for reuse: an LRU cache bounded by a memory budget.

Bytes are promised to a load before it starts (its estimate) and counted for real once it is done;
least recently used models go first to make room, but never one that a request is still calling.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from models_local.handlers.base import RuntimeUnsupported
from models_local.sizing import mib

log = logging.getLogger(__name__)


class ModelTooLarge(RuntimeUnsupported):
    """Refused before loading: the model's weights do not fit the memory budget."""


@dataclass
class Entry:
    name: str  # the model, for logs
    obj: Any
    size: int
    call_lock: threading.Lock = field(default_factory=threading.Lock)  # tokenizers are not thread-safe
    users: int = 0  # requests between lookup and the end of their call: never evicted meanwhile
    added: float = field(default_factory=time.monotonic)


@dataclass
class Reservation:
    size: int  # bytes still promised to a load in progress; 0 once added or released


class ModelCache:
    """Entries by key, least recently used first. `free` gives dropped models' memory back."""

    def __init__(self, budget: int, free: Callable[[], None]) -> None:
        self.budget = budget
        self.entries: OrderedDict[Hashable, Entry] = OrderedDict()  # read under self.lock
        self.lock = threading.Lock()
        self._free = free
        self._reserved = 0  # bytes promised to loads in progress
        self._load_locks: dict[Hashable, threading.Lock] = {}

    def check_fits(self, model: str, size: int) -> None:
        if size > self.budget:
            raise ModelTooLarge(
                f"{model} needs about {mib(size)}, over the {mib(self.budget)} budget of the local runtime"
            )

    def load_lock(self, key: Hashable) -> threading.Lock:
        """Held around loading `key`: concurrent first uses wait there and the first one loads."""
        with self.lock:
            return self._load_locks.setdefault(key, threading.Lock())

    def take(self, key: Hashable) -> Entry | None:
        """The cached entry for `key`, marked in use and most recently used; release() it after."""
        with self.lock:
            entry = self.entries.get(key)
            if entry is not None:
                self.entries.move_to_end(key)
                entry.users += 1
            return entry

    def reserve(self, model: str, size: int) -> Reservation:
        """Room for a load of about `size` bytes, made now; refused when it can never fit."""
        self.check_fits(model, size)
        with self.lock:
            evicted = self._evict_for(size)
            self._reserved += size
        self._dropped(evicted, f"to make room for {model}")
        return Reservation(size)

    def unreserve(self, reservation: Reservation) -> None:
        """The load failed: its promised bytes are free again (a no-op after add())."""
        with self.lock:
            self._reserved -= reservation.size
            reservation.size = 0

    def add(self, key: Hashable, entry: Entry, reservation: Reservation) -> Entry:
        """Cache a loaded model in place of its reservation, marked in use."""
        entry.users = 1
        with self.lock:
            self._reserved -= reservation.size
            reservation.size = 0
            evicted = self._evict_for(entry.size)
            self.entries[key] = entry
        self._dropped(evicted, f"to make room for {entry.name}")
        return entry

    def release(self, entry: Entry) -> None:
        """A call on `entry` ended: loads made while it was in use may have gone over the budget."""
        with self.lock:
            entry.users -= 1
            evicted = self._evict_for(0)
        self._dropped(evicted, "to get back within the budget")

    def used(self) -> int:
        with self.lock:
            return sum(e.size for e in self.entries.values())

    def names(self) -> list[str]:
        with self.lock:
            return [e.name for e in self.entries.values()]

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
        self._free()

    def drop(self, name: str) -> bool:
        """Unload the entries of model `name` that no call is using; True if there were any."""
        with self.lock:
            dropped = [key for key, e in self.entries.items() if e.name == name and e.users == 0]
            evicted = [self.entries.pop(key) for key in dropped]
        self._dropped(evicted, "on request")
        return bool(evicted)

    def _evict_for(self, size: int) -> list[Entry]:
        """Drop least recently used models until `size` more bytes fit. Caller holds self.lock.

        Models in use stay: dropping one frees nothing until its call ends, and the next request
        for it would load a second copy. Until they are done the cache may go over the budget.
        """
        evicted = []
        for key in list(self.entries):
            if sum(e.size for e in self.entries.values()) + self._reserved + size <= self.budget:
                break
            if self.entries[key].users == 0:
                evicted.append(self.entries.pop(key))
        return evicted

    def _dropped(self, evicted: list[Entry], why: str) -> None:
        if not evicted:
            return
        started = time.monotonic()
        self._free()  # outside the lock: collecting takes a while
        freed = time.monotonic() - started
        for e in evicted:
            log.info(
                "evicted %s (%s, cached %.1f s) %s; freeing took %.2f s",
                e.name,
                mib(e.size),
                started - e.added,
                why,
                freed,
            )
