"""A run's journal: one JSON line per event that a resume needs, next to the run's trace.

The journal is an observer of the run's event stream (`Journaling`): each line is written, flushed
and synced before the event goes on to anyone else. The schedulers start a task's dependants only
after the consumer has taken its TaskFinished, so a task's end is on disk before anything that
reads its outputs starts. Lines are only ever appended; a line torn by a crash mid-write (the last
one) is ignored on reading, never fatal.

    {"e": "start", "request_id", "request", "history", "seed", "resumed_from", "crashes", "earlier_calls"}
    {"e": "planned", "task": {...}}      a task of the plan as it streams
    {"e": "dropped", "id"}               a streamed task the plan that counts does not keep
    {"e": "plan", "plan": [...]}         the plan that counts
    {"e": "choice", "id", "task", "model", "reason", "candidates", "source"}
    {"e": "finished", "id", "task", "model", "seed", "seconds", "cached", "outputs": [{..., "sha256"}]}
    {"e": "llm", "stage", "input_tokens", "output_tokens", "seconds"}   an LLM call that ended
    {"e": "done", "outcome", "error"}    the run ended (a journal without it is of a run that died)
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hugginggpt.config import Settings
from hugginggpt.files.artifacts import Artifact
from hugginggpt.files.hashing import artifact_sha256
from hugginggpt.llms.interface import LLMCall, Message
from hugginggpt.observability.observers import Observer
from hugginggpt.run.events import (
    Done,
    Event,
    ModelSelected,
    PlanReady,
    TaskDropped,
    TaskFinished,
    TaskPlanned,
)
from hugginggpt.stages.planner import trim_history

log = logging.getLogger(__name__)

SUFFIX = ".journal.jsonl"
MAX_LINE_CHARS = 2_000_000  # a line longer than this is not read (a trace field is cut at 20,000)


def journal_path(trace_path: Path) -> Path:
    """The journal beside a run's trace: traces/<request id>.journal.jsonl."""
    return trace_path.with_name(trace_path.stem + SUFFIX)


class Journal:
    """Appends lines to one file, each flushed and synced before `write` returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "ab")  # noqa: SIM115 (closed in close())

    def write(self, entry: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(entry, ensure_ascii=False, default=str).encode("utf-8") + b"\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


class Journaling(Observer):
    """Journals each event of the run before it goes on (observe.observed shows an event to its
    observers before the listener gets it). `calls`: the run's LLM call log (the ones that ended
    are journaled with their tokens). A journal that cannot be written (the conversation's folder
    went away) leaves the run as it is."""

    def __init__(
        self, path: Path, start: Mapping[str, Any], *, calls: Callable[[], Sequence[LLMCall]], root: Path
    ) -> None:
        self.path, self.calls, self.root = path, calls, root
        self.logged = 0
        self.journal: Journal | None = None
        try:
            self.journal = Journal(path)
            self.journal.write({"e": "start", **start})
        except OSError as e:
            log.info("no journal for %s: %s", path.name, e)
            self.closed()

    def seen(self, event: Event) -> None:
        if self.journal is None:
            return
        try:
            self.logged = _write_calls(self.journal, self.calls(), self.logged)
            entry = entry_of(event, self.root)
            if entry is not None:
                self.journal.write(entry)
        except OSError as e:
            log.info("journal %s stopped: %s", self.path.name, e)
            self.closed()

    def closed(self) -> None:
        if self.journal is not None:
            self.journal.close()
            self.journal = None


def _write_calls(journal: Journal, calls: Sequence[LLMCall], logged: int) -> int:
    """Journal the calls that ended since the last look, in order (a call in flight waits)."""
    while logged < len(calls) and (calls[logged].seconds > 0 or calls[logged].error is not None):
        call = calls[logged]
        journal.write(
            {
                "e": "llm",
                "stage": call.stage,
                "input_tokens": call.usage.prompt_tokens,
                "output_tokens": call.usage.completion_tokens,
                "seconds": round(call.seconds, 4),
            }
        )
        logged += 1
    return logged


def entry_of(event: Event, root: Path) -> dict[str, Any] | None:
    """The journal line of an event; None for those a resume does not need."""
    match event:
        case TaskPlanned(task=task):
            return {"e": "planned", "task": task.to_json()}
        case TaskDropped(task_id=task_id):
            return {"e": "dropped", "id": task_id}
        case PlanReady(plan=plan):
            return {"e": "plan", "plan": plan.to_json()}
        case ModelSelected():
            return {
                "e": "choice",
                "id": event.task_id,
                "task": event.task,
                "model": event.model,
                "reason": event.reason,
                "candidates": list(event.candidates),
                "source": str(event.source),
            }
        case TaskFinished():
            return {
                "e": "finished",
                "id": event.task_id,
                "task": event.task,
                "model": event.model,
                "seed": event.seed,
                "seconds": round(event.seconds, 4),
                "cached": event.cached,
                "outputs": [_output(a, root) for a in event.outputs],
            }
        case Done():
            return {"e": "done", "outcome": str(event.outcome), "error": event.error}
    return None


def _output(artifact: Artifact, root: Path) -> dict[str, Any]:
    return {**artifact.to_json(root), "sha256": artifact_sha256(artifact)}


@dataclass
class JournalState:
    """What a journal says of its run, read back."""

    path: Path
    start: dict[str, Any] = field(default_factory=dict)
    planned: dict[int, dict[str, Any]] = field(default_factory=dict)  # streamed tasks still counted
    plan: list[dict[str, Any]] | None = None
    choices: dict[int, dict[str, Any]] = field(default_factory=dict)
    finished: dict[int, dict[str, Any]] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)  # this attempt's LLM calls that ended
    done: dict[str, Any] | None = None
    torn: bool = False  # the last line was cut by a crash mid-write

    @property
    def request_id(self) -> str:
        return str(self.start.get("request_id") or self.path.name.removesuffix(SUFFIX))

    @property
    def crashes(self) -> int:
        """Crashes before this attempt (0 for a first attempt)."""
        return int(self.start.get("crashes") or 0)

    @property
    def earlier_calls(self) -> list[dict[str, Any]]:
        """The LLM calls of every attempt so far, this one's included."""
        return [*(self.start.get("earlier_calls") or []), *self.calls]


def read_journal(path: Path) -> JournalState:
    """Raises OSError when the file cannot be read, ValueError when it has no start line."""
    state = JournalState(path)
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    for number, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            if len(raw) > MAX_LINE_CHARS:
                raise ValueError("line too long")
            entry = json.loads(raw)
            if not isinstance(entry, dict):
                raise ValueError("not an object")
            _apply(state, entry)
        except (ValueError, TypeError, KeyError):
            if number == len(lines) - 1:  # no newline after it: cut mid-write
                state.torn = True
            else:
                log.warning("%s: line %d unreadable, skipped", path.name, number + 1)
    if not state.start:
        raise ValueError(f"{path.name} is not a run's journal")
    return state


def _apply(state: JournalState, entry: dict[str, Any]) -> None:
    kind = entry.get("e")
    if kind == "start":
        state.start = entry
    elif kind == "planned":
        task = entry["task"]
        state.planned[int(task["id"])] = task
    elif kind == "dropped":
        state.planned.pop(int(entry["id"]), None)
        state.finished.pop(int(entry["id"]), None)
    elif kind == "plan":
        state.plan = list(entry["plan"])
    elif kind == "choice":
        state.choices[int(entry["id"])] = entry
    elif kind == "finished":
        state.finished[int(entry["id"])] = entry
    elif kind == "llm":
        state.calls.append(entry)
    elif kind == "done":
        state.done = entry


def journals(folder: Path) -> list[Path]:
    """A conversation's journals, oldest first (request ids start with their UTC time)."""
    return sorted((folder / "traces").glob(f"*{SUFFIX}"))


def unfinished(folder: Path) -> list[JournalState]:
    """The runs of a conversation that died and were not resumed since, oldest first: no done
    line, and no later journal says it resumed them."""
    states = []
    for path in journals(folder):
        try:
            states.append(read_journal(path))
        except (OSError, ValueError) as e:
            log.info("journal %s not read: %s", path.name, e)
    resumed = {s.start.get("resumed_from") for s in states}
    # by start time to the second, then later attempts after earlier ones (ids of one second tie)
    states.sort(key=lambda s: (s.request_id[:15], s.crashes))
    return [s for s in states if s.done is None and s.request_id not in resumed]


def start_entry(header: Mapping[str, Any], history: Sequence[Message], settings: Settings) -> dict[str, Any]:
    """The start line: what a run needs to be run again (its request, the history its prompts
    hold, the base of its seeds) and, for a resumed run, what came before it."""
    return {
        "request_id": header.get("request_id"),
        "request": header.get("request"),
        "history": trim_history(history, settings.history_tokens),
        "seed": settings.seed,
        "resumed_from": header.get("resumed_from"),
        "crashes": header.get("crashes", 0),
        "earlier_calls": header.get("earlier_calls", []),
    }
