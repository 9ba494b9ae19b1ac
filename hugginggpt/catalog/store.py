"""Loading the catalog and ranking candidates for a task."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from .card import ModelCard

SHIPPED = Path(__file__).parent / "models.jsonl"


class Catalog:
    def __init__(self, cards: Iterable[ModelCard]):
        by_task: dict[str, dict[str, ModelCard]] = defaultdict(dict)
        for card in cards:
            by_task[card.task][card.id] = card  # a later card overrides an earlier one
        self._by_task = {
            task: sorted(models.values(), key=lambda c: (-c.downloads, -c.likes, c.id))
            for task, models in by_task.items()
        }

    def tasks(self) -> list[str]:
        return sorted(self._by_task)

    def candidates(
        self, task: str, *, k: int = 5, runnable: Callable[[ModelCard], bool] | None = None
    ) -> list[ModelCard]:
        """The top `k` models for `task` that `runnable` accepts, most downloaded first."""
        ranked = self._by_task.get(task, [])
        picked = [card for card in ranked if runnable is None or runnable(card)]
        return picked[:k]

    def __len__(self) -> int:
        return sum(len(models) for models in self._by_task.values())


def read_jsonl(path: Path) -> list[ModelCard]:
    with open(path, encoding="utf-8") as f:
        return [ModelCard.from_json(json.loads(line)) for line in f if line.strip()]


def load_catalog(extra: Iterable[Path] = ()) -> Catalog:
    """The shipped catalog plus the user's files, later files overriding earlier ones."""
    cards = read_jsonl(SHIPPED) if SHIPPED.exists() else []
    for path in extra:
        cards.extend(read_jsonl(Path(path)))
    return Catalog(cards)
