"""The Catalog: the shipped cards and the user's entries, merged and ranked per task; load_catalog().

The shipped catalog is an indexed file (indexed_file.py) read lazily; user files are small and read
whole. User entries sit in an overlay that overrides shipped cards with the same task and id.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from hugginggpt.catalog.card import ModelCard
from hugginggpt.catalog.indexed_file import IndexedFile
from hugginggpt.catalog.rules import folder_library, is_local
from hugginggpt.catalog.tools import ToolRef, task_spec
from hugginggpt.catalog.userfile import Entry, read_user_file
from hugginggpt.tasks import BUILT_IN, register

SHIPPED = Path(__file__).parent / "models.jsonl"


class Catalog:
    def __init__(self, cards: Iterable[ModelCard] = (), *, shipped: IndexedFile | None = None):
        self._shipped = shipped
        self._overlay: dict[str, dict[str, ModelCard]] = {}
        self._sorted: dict[str, list[ModelCard]] = {}
        # User entries not yet merged, per task: merged on the task's first use, so that opening
        # the catalog with a large user file costs nothing for the tasks a run never asks about.
        self._pending: dict[str, list[Entry]] = {}
        self.problems: list[str] = []  # "file:line: message" for user entries that were skipped
        # One catalog serves every conversation of the app: a task's pending entries are merged
        # by one thread while the others wait, so that none ranks a half-merged overlay.
        self._lock = threading.RLock()
        for card in cards:
            self.add(card)

    def add(self, card: ModelCard) -> None:
        """Add `card`, replacing any card with the same task and id."""
        with self._lock:
            _register_tool_task(card.task, card.tool)
            self._merge(card.task)
            self._overlay.setdefault(card.task, {})[card.id] = card
            self._sorted.pop(card.task, None)

    def _merge(self, task: str) -> None:
        if task not in self._pending:  # the common case, without the lock
            return
        with self._lock:
            for entry in self._pending.get(task, ()):
                model_id = entry.fields["id"]
                earlier = self._overlay.get(task, {}).get(model_id)
                if earlier is None and self._shipped is not None:
                    earlier = self._shipped.find(task, model_id)
                self._overlay.setdefault(task, {})[model_id] = card_from_entry(entry.fields, earlier)
                self._sorted.pop(task, None)
            self._pending.pop(task, None)  # only now: other threads wait above until it is done

    def get(self, model_id: str, task: str | None = None) -> ModelCard | None:
        """The card for `model_id` (in `task`, or in any task when None)."""
        for t in [task] if task else self.tasks():
            self._merge(t)
            card = self._overlay.get(t, {}).get(model_id)
            if card is None and self._shipped is not None:
                card = self._shipped.find(t, model_id)
            if card is not None:
                return card
        return None

    def tasks(self) -> list[str]:
        names = set(self._overlay) | set(self._pending)
        if self._shipped is not None:
            names.update(self._shipped.tasks())
        return sorted(names)

    def ranked(self, task: str) -> Iterator[ModelCard]:
        """Every card for `task`, most downloaded first, then most liked."""
        self._merge(task)
        overlay = self._overlay.get(task, {})
        if task not in self._sorted:
            self._sorted[task] = sorted(overlay.values(), key=lambda c: c.rank_key)
        shipped: Iterable[ModelCard] = ()
        if self._shipped is not None:
            shipped = (c for c in self._shipped.ranked(task) if c.id not in overlay)
        return heapq.merge(self._sorted[task], shipped, key=lambda c: c.rank_key)

    def candidates(
        self, task: str, *, k: int = 5, runnable: Callable[[ModelCard], bool] | None = None
    ) -> list[ModelCard]:
        """The top `k` models for `task` that `runnable` accepts, most downloaded first."""
        picked: list[ModelCard] = []
        for card in self.ranked(task):
            if len(picked) >= k:
                break
            if runnable is None or runnable(card):
                picked.append(card)
        return picked

    def __iter__(self) -> Iterator[ModelCard]:
        for task in self.tasks():
            yield from self.ranked(task)

    def __len__(self) -> int:
        for task in list(self._pending):
            self._merge(task)
        total = self._shipped.count if self._shipped is not None else 0
        for task, cards in self._overlay.items():
            if self._shipped is None:
                total += len(cards)
            else:
                total += sum(1 for model_id in cards if self._shipped.find(task, model_id) is None)
        return total

    def apply(self, entries: Iterable[Entry]) -> None:
        """Merge user entries: a known (task, id) is updated field by field, a new one is added."""
        with self._lock:
            for entry in entries:
                _register_tool_task(entry.key[0], entry.fields.get("tool"))
                self._pending.setdefault(entry.key[0], []).append(entry)


def _register_tool_task(task: str, tool: ToolRef | None) -> None:
    """A tool that is a task type of its own makes that type known (tasks.register)."""
    if tool is not None and task not in BUILT_IN:
        register(task_spec(task, tool))


def card_from_entry(fields: dict, earlier: ModelCard | None) -> ModelCard:
    """A card from a user entry's fields, over the earlier card of the same task and id if any."""
    given = dict(fields)
    if earlier is None:
        if given.get("path") and "library" not in given:
            given["library"] = folder_library(given["path"])
        if "counts_known" not in given:
            given["counts_known"] = "downloads" in given or "likes" in given
        card = ModelCard.from_json(given)
        if "local" not in given:
            local = is_local(card.task, card.library) and not (card.endpoint_url and not card.path)
            card = replace(card, local=local)
        return card
    if "downloads" in given or "likes" in given:
        given.setdefault("counts_known", True)
    card = replace(earlier, **given)
    if "local" not in given and ("library" in given or "path" in given):
        card = replace(card, local=is_local(card.task, card.library))
    return card


def load_catalog(extra: Iterable[Path] = (), *, shipped: Path | None = SHIPPED) -> Catalog:
    """The shipped catalog plus the user's files `extra` (settings.catalog_paths: $HUGGINGGPT_CATALOG,
    then --catalog), later files overriding earlier ones.

    Invalid user entries are skipped and listed in `catalog.problems`; the valid ones still load.
    """
    indexed = IndexedFile(shipped) if shipped is not None and Path(shipped).exists() else None
    catalog = Catalog(shipped=indexed)
    for path in map(Path, extra):
        entries, problems = read_user_file(path)
        catalog.problems.extend(problems)
        catalog.apply(entries)
    return catalog
