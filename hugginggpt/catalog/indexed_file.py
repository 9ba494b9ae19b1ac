"""The shipped catalog's file format: JSONL pre-sorted by task and rank, with an index header.

Line 1 is a header object {"format": "hugginggpt-catalog", "version": 1, "count": N,
"tasks": {task: [start, end, n]}} where start/end are byte offsets of the task's rows, counted
from the first byte after the header line. Every other line is one ModelCard as JSON, rows of a
task sorted most-downloaded first. Opening reads only the header and maps the file; a query parses
only the rows it needs, so opening stays constant-time and a top-K query reads about K rows,
whatever the catalog's size. The file stays plain JSONL for people and diff tools.
"""

from __future__ import annotations

import json
import mmap
import re
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

from hugginggpt.catalog.card import ModelCard

FORMAT = "hugginggpt-catalog"
VERSION = 1


def write_indexed(cards: Iterable[ModelCard], path: Path) -> int:
    """Write `cards` (one per (task, id); later duplicates win) in the indexed format."""
    by_task: dict[str, dict[str, ModelCard]] = {}
    for card in cards:
        by_task.setdefault(card.task, {})[card.id] = card
    ranked = ((task, sorted(by_task[task].values(), key=lambda c: c.rank_key)) for task in sorted(by_task))
    return write_ranked(ranked, path)


def write_ranked(groups: Iterable[tuple[str, Iterable[ModelCard]]], path: Path) -> int:
    """Write cards given task by task, each task's cards already ranked; streams, so a catalog of
    any size is written without holding it in memory. Raises ValueError on an unranked task."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body_path = path.with_name(path.name + ".body")
    index: dict[str, list[int]] = {}
    offset = 0
    with open(body_path, "wb") as body:
        for task, cards in groups:
            if task in index:
                raise ValueError(f"task {task!r} given twice")
            start, n, last = offset, 0, None
            for card in cards:
                if card.task != task:
                    raise ValueError(f"{card.id}: task {card.task!r} in the rows of {task!r}")
                if last is not None and card.rank_key < last:
                    raise ValueError(f"{task}: rows are not ranked at {card.id}")
                last = card.rank_key
                line = json.dumps(card.to_json(), ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                body.write(line)
                offset += len(line)
                n += 1
            index[task] = [start, offset, n]
    count = sum(n for _, _, n in index.values())
    header = {"format": FORMAT, "version": VERSION, "count": count, "tasks": index}
    with open(path, "wb") as out, open(body_path, "rb") as body:
        out.write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
        shutil.copyfileobj(body, out, 1 << 20)
    body_path.unlink()
    return count


class IndexedFile:
    """Read-only view of an indexed catalog file; rows are parsed on demand, per task."""

    def __init__(self, path: Path):
        self.path = Path(path)
        with open(self.path, "rb") as f:
            header = json.loads(f.readline())
            self._base = f.tell()
            if header.get("format") != FORMAT or header.get("version") != VERSION:
                raise ValueError(f"{self.path}: not a {FORMAT} v{VERSION} file")
            size = f.seek(0, 2)
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self._index: dict[str, tuple[int, int, int]] = {t: tuple(v) for t, v in header["tasks"].items()}
        self.count: int = header["count"]
        # Rows already parsed, per task: a prefix of the ranked list, and where parsing stopped.
        self._parsed: dict[str, list[ModelCard]] = {}
        self._next: dict[str, int] = {}
        # Per task, built on first lookup: the id's JSON string (as written) -> the row's offset.
        self._ids: dict[str, dict[bytes, int]] = {}

    def tasks(self) -> list[str]:
        return list(self._index)

    def ranked(self, task: str) -> Iterator[ModelCard]:
        """The task's cards, best first; parses lazily and remembers what it parsed."""
        if task not in self._index:
            return
        _, end, _ = self._index[task]
        parsed = self._parsed.setdefault(task, [])
        i = 0
        while True:
            if i < len(parsed):
                yield parsed[i]
                i += 1
                continue
            pos = self._next.get(task, self._index[task][0])
            if pos >= end:
                return
            start = self._base + pos
            stop = self._map.find(b"\n", start, self._base + end)
            stop = self._base + end if stop < 0 else stop
            parsed.append(ModelCard.from_json(json.loads(self._map[start:stop])))
            self._next[task] = stop + 1 - self._base

    def find(self, task: str, model_id: str) -> ModelCard | None:
        """The card for `model_id` in `task`: one dict lookup once the task's id index is built."""
        if task not in self._index:
            return None
        if task not in self._ids:
            self._ids[task] = self._scan_ids(task)
        offset = self._ids[task].get(json.dumps(model_id, ensure_ascii=False).encode())
        if offset is None:
            return None
        stop = self._map.find(b"\n", offset)
        return ModelCard.from_json(json.loads(self._map[offset : stop if stop >= 0 else len(self._map)]))

    def _scan_ids(self, task: str) -> dict[bytes, int]:
        """Rows start {"id":<id>,"task":... (write_ranked writes the id first): one regex pass over
        the task's rows, no JSON parsing; ids are compared as the JSON strings written."""
        start, end, _ = self._index[task]
        before = self._base + start - 1  # the newline ending the previous line (or the header)
        chunk = self._map[before : self._base + end]
        return {m.group(1): before + m.start() + 1 for m in _ROW_ID.finditer(chunk)}


_ROW_ID = re.compile(rb'\n\{"id":("[^"\\]*(?:\\.[^"\\]*)*"),"task":')
