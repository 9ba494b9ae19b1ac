"""What a chosen model will cost before it runs: bytes to download, memory on this device, seconds,
and the price of a hosted call.

Download and memory come from the endpoint where the model would run (Endpoint.footprint). Seconds
are learnt from this machine's own past runs of the same model, task and device, kept in the work
folder (<workdir>/.estimates/seconds.json) and updated after every run; until a model has run here,
a prior from its size and task stands in. A card without a size or licence gets them from the Hub
on first use; they are kept beside the seconds (facts.json), so the Hub is asked once per model.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hugginggpt import tasks as task_types
from hugginggpt.catalog import ModelCard
from hugginggpt.catalog.facts import Facts, hub_facts
from hugginggpt.catalog.hub import network_errors
from hugginggpt.endpoints import Endpoint, Footprint
from hugginggpt.run.records import TaskRecord, TaskStatus
from hugginggpt.stages.choice import Estimate

if TYPE_CHECKING:
    from hugginggpt.stages.choice import Choice

log = logging.getLogger(__name__)

KEEP_RUNS = 20  # past runs kept per model, task and device; their median is the estimate
# The prior, before a model has run here: loading reads its weights at about this speed, a download
# goes at about this speed, and a call takes a task's usual seconds on top.
LOAD_BYTES_PER_SECOND = 200e6
DOWNLOAD_BYTES_PER_SECOND = 20e6
HOSTED_CALL_SECONDS = 3.0
CALL_SECONDS = 1.0  # any other task
UNREACHABLE_SECONDS = 60.0  # no size look-ups for this long after the Hub could not be reached


class _JsonFile:
    """A small JSON object in a file, read and replaced whole under a process-wide lock."""

    _locks: dict[Path, threading.Lock] = {}
    _locks_lock = threading.Lock()

    def __init__(self, path: Path):
        self.path = Path(path)
        with self._locks_lock:
            self.lock = self._locks.setdefault(self.path.resolve(), threading.Lock())

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # none yet, or damaged: start again
            return {}
        return data if isinstance(data, dict) else {}

    def write(self, data: dict[str, Any]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            part = self.path.with_name(self.path.name + f".{os.getpid()}.part")
            part.write_text(json.dumps(data, indent=0, sort_keys=True), encoding="utf-8")
            part.replace(self.path)
        except OSError as e:  # a read-only work folder: estimates stay priors
            log.info("estimates not kept in %s: %s", self.path, e)


class RunTimes:
    """Seconds of past runs per model, task and device."""

    def __init__(self, path: Path):
        self.file = _JsonFile(path)

    @staticmethod
    def key(model: str, task: str, where: str) -> str:
        return f"{where}|{task}|{model}"

    def learnt(self, model: str, task: str, where: str) -> list[float]:
        with self.file.lock:
            runs = self.file.read().get(self.key(model, task, where), [])
        return [float(s) for s in runs if isinstance(s, int | float) and s >= 0]

    def add(self, model: str, task: str, where: str, seconds: float) -> None:
        with self.file.lock:
            data = self.file.read()
            runs = [*data.get(self.key(model, task, where), []), round(seconds, 4)]
            data[self.key(model, task, where)] = runs[-KEEP_RUNS:]
            self.file.write(data)


class FactBook:
    """Sizes and licences looked up on the Hub for cards without them, kept per model id."""

    _unreachable_until = 0.0  # process-wide: a Hub that cannot be reached costs one time-out a minute

    def __init__(self, path: Path):
        self.file = _JsonFile(path)

    def complete(self, card: ModelCard) -> ModelCard:
        """`card` with its size and licence: its own, else kept, else asked of the Hub (and kept)."""
        if card.size_bytes is not None and card.license is not None:
            return card
        if card.path or card.endpoint_url or card.library == "builtin":  # not a Hub repository
            return card
        with self.file.lock:
            kept = self.file.read().get(card.id)
        if not isinstance(kept, dict):
            if time.monotonic() < FactBook._unreachable_until:
                return card
            from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

            try:
                found = hub_facts(card.id)
            except (HfHubHTTPError, ValueError, OfflineModeIsEnabled) as e:  # missing, gated; offline
                log.info("no size or licence for %s from the Hub: %s", card.id, e)
                return card
            except network_errors() as e:
                log.info("the Hub cannot be reached for sizes and licences: %s", e)
                FactBook._unreachable_until = time.monotonic() + UNREACHABLE_SECONDS
                return card
            kept = {"size_bytes": found.size_bytes, "license": found.license}
            with self.file.lock:
                data = self.file.read()
                data[card.id] = kept
                self.file.write(data)
        facts = Facts(kept.get("size_bytes"), kept.get("license"))
        return replace(
            card,
            size_bytes=card.size_bytes if card.size_bytes is not None else facts.size_bytes,
            license=card.license or facts.license,
        )


def learnt_as(footprint: Footprint) -> str:
    """What seconds are kept by: the device, and whether the call finds the model loaded (a first
    call loads it, often many times longer than the calls after it)."""
    return footprint.where + (" loaded" if footprint.loaded else "")


def prior_seconds(task: str, footprint: Footprint) -> float:
    """Seconds before any run here: load the weights, maybe download them, then one call."""
    spec = task_types.get(task)
    slow = spec.seconds if spec is not None else None
    if not footprint.where.startswith("local"):
        return HOSTED_CALL_SECONDS + ((slow or 0.0) / 10)
    call = slow if slow is not None else CALL_SECONDS
    if footprint.loaded:
        return call
    load = (footprint.memory_bytes or 0) / LOAD_BYTES_PER_SECOND
    download = (footprint.download_bytes or 0) / DOWNLOAD_BYTES_PER_SECOND
    return load + download + call


class Estimator:
    """Estimates for chosen models, and what every run teaches about seconds. One per work folder."""

    def __init__(self, folder: Path):
        self.times = RunTimes(Path(folder) / "seconds.json")
        self.facts = FactBook(Path(folder) / "facts.json")

    def footprint(self, endpoint: Endpoint, card: ModelCard) -> Footprint:
        return endpoint.footprint(self.facts.complete(card))

    def estimate(self, endpoint: Endpoint, card: ModelCard, footprint: Footprint | None = None) -> Estimate:
        found = footprint or self.footprint(endpoint, card)
        runs = self.times.learnt(card.id, card.task, learnt_as(found))
        if not runs and found.loaded:  # first calls (with the load) bound the calls after them
            runs = self.times.learnt(card.id, card.task, found.where)
        seconds = statistics.median(runs) if runs else prior_seconds(card.task, found)
        return Estimate(
            learnt_as(found), found.download_bytes, found.memory_bytes, seconds, found.cost_usd, len(runs)
        )

    def learn(self, choices: Mapping[int, Choice], records: Iterable[TaskRecord]) -> None:
        """Keep the seconds of each model call that finished here (not those served from the cache)."""
        for record in records:
            choice = choices.get(record.id)
            if record.status is not TaskStatus.DONE or record.cached or choice is None:
                continue
            if choice.estimate is None or record.model is None:
                continue
            last = record.attempts[-1] if record.attempts else None
            if last is None or last.get("error") is not None or last.get("model") != record.model:
                continue
            where = choice.estimate.where if choice.model and choice.model.id == record.model else None
            if where is not None:
                self.times.add(record.model, record.task, where, float(last["seconds"]))


def side_by_side(choices: Mapping[int, Choice], records: Iterable[TaskRecord]) -> list[dict[str, Any]]:
    """Per task that ran: the estimate next to what it took, for the trace and the run's summary."""
    rows = []
    for record in records:
        choice = choices.get(record.id)
        if choice is None or choice.estimate is None or record.status is not TaskStatus.DONE:
            continue
        rows.append(
            {
                "id": record.id,
                "model": record.model,
                "estimated_seconds": choice.estimate.to_json()["seconds"],
                "seconds": round(record.seconds, 3),
                "cached": record.cached,
                "estimated_download_bytes": choice.estimate.download_bytes,
                "estimated_memory_bytes": choice.estimate.memory_bytes,
            }
        )
    return rows
