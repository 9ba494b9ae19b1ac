"""Conversations on the server's disk, so that they outlast closed tabs and app restarts.

Layout under `root` (the work folder's `conversations/`): `<id>.json`, the conversation's record
(the chat as shown, what the LLM sees of it, its title and times), next to `<id>/`, its workspace
(uploads, outputs, traces). `<id>` is a hash of the conversation's key: the key, the browser's
secret, is written nowhere on the server, and the folder names lead back to no key.

Deleting moves both into `.deleted/` for a short undo; whoever serves the files removes its copies
at once (webui.chat.conversations), so nothing of it is reachable meanwhile. Records not used for
`retention_seconds`, and deleted ones past the undo, are removed for good by `sweep()`; so are,
with a cap on the bytes kept (`max_bytes`), the least recently updated ones beyond it.
No Gradio here: the store is plain files and JSON.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from hugginggpt.config import Settings

log = logging.getLogger(__name__)

PRIVATE_RETENTION_HOURS = 30 * 24.0
PUBLIC_RETENTION_HOURS = 24.0
PUBLIC_MAX_GB = 5.0  # what a public app keeps at most, unless the setting says otherwise
UNDO_SECONDS = 600.0  # how long a deleted conversation can be brought back
BROWSER_KEY = re.compile(r"^b-[A-Za-z0-9_-]{20,64}$")  # a browser's own key (webui.page.saved)


def retention_hours(settings: Settings) -> float:
    """How long an unused conversation is kept: the setting, else by whether strangers come."""
    if settings.app_retention_hours is not None:
        return settings.app_retention_hours
    return PUBLIC_RETENTION_HOURS if settings.is_public else PRIVATE_RETENTION_HOURS


def max_bytes(settings: Settings) -> int | None:
    """How many bytes of conversations are kept at most: the setting (0: no cap), else a cap on a
    public app only (strangers fill the disk; on a private app it is the owner's own)."""
    gb = settings.app_conversations_max_gb
    if gb is None:
        gb = PUBLIC_MAX_GB if settings.is_public else 0
    return int(gb * 1e9) if gb else None


def browser_key(key: Any) -> bool:
    """Whether `key` is a browser's: its conversation is kept on disk; an API client's (keyed by its
    session) ends with that session."""
    return isinstance(key, str) and bool(BROWSER_KEY.match(key))


class ConversationStore:
    def __init__(
        self,
        root: Path,
        *,
        retention_seconds: float,
        undo_seconds: float = UNDO_SECONDS,
        max_bytes: int | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.root = Path(root).resolve()
        self.deleted = self.root / ".deleted"
        self.retention_seconds = retention_seconds
        self.undo_seconds = undo_seconds
        self.max_bytes = max_bytes
        self.clock = clock
        self.deleted.mkdir(parents=True, exist_ok=True)
        # With a cap: the bytes of each conversation on disk, by its record's path (saved or deleted).
        # A save measures its own conversation only; a sweep measures them all again.
        self._sizes: dict[Path, int] | None = None
        self._owners: dict[Path, str] = {}  # whose each one is (a caller's hash), for the shares

    @staticmethod
    def folder_id(key: str) -> str:
        """The folder of a browser's key; a key "folder:<id>" names the folder itself (a
        conversation taken up with no page open, webui.chat.conversations.ConversationTable.adopt)."""
        if key.startswith("folder:"):
            return key.removeprefix("folder:")
        return hashlib.sha256(key.encode()).hexdigest()[:40]

    def running(self) -> list[tuple[str, dict[str, Any]]]:
        """(folder id, record) of each conversation saved while a request ran: the app stopped."""
        found = []
        for path in sorted(self.root.glob("*.json")):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if (
                isinstance(record, dict)
                and record.get("running") is True
                and not self._expired(record.get("updated"))
            ):
                found.append((path.stem, record))
        return found

    def workspace_root(self, key: str) -> Path:
        return self.root / self.folder_id(key)

    def _record(self, key: str) -> Path:
        return self.root / f"{self.folder_id(key)}.json"

    def load(self, key: str) -> dict[str, Any] | None:
        """The record saved under `key`; None when there is none, it expired or it cannot be read."""
        path = self._record(key)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            log.warning("conversation record %s cannot be read (%s): left aside", path.name, e)
            return None
        if not isinstance(record, dict) or self._expired(record.get("updated")):
            return None
        return record

    def save(self, key: str, record: dict[str, Any]) -> None:
        """Writes the record (its `updated` time set now); a reader never sees half a file."""
        record = {**record, "updated": self.clock()}
        path = self._record(key)
        partial = path.with_suffix(".partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the app's own user only
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(record, ensure_ascii=False, default=str))
        os.replace(partial, path)
        os.utime(path, (record["updated"], record["updated"]))  # its age, for the cap's order
        if self.max_bytes is not None:
            self._measured()[path] = self._size(path)
            self._owners[path] = str(record.get("caller") or "")

    @property
    def over_cap(self) -> bool:
        """Whether the conversations on disk take more than the cap (as last measured)."""
        return self.would_pass(0)

    def would_pass(self, incoming: int) -> bool:
        """Whether `incoming` more bytes would take the conversations past the cap."""
        return self.max_bytes is not None and sum(self._measured().values()) + incoming > self.max_bytes

    def delete(self, key: str) -> bool:
        """Moves the record and the workspace aside for an undo; False when there was no record."""
        name = self.folder_id(key)
        record = self._record(key)
        if not record.is_file():
            shutil.rmtree(self.workspace_root(key), ignore_errors=True)  # never saved: nothing to undo
            return False
        shutil.rmtree(self.deleted / name, ignore_errors=True)
        os.replace(record, self.deleted / record.name)
        if self.workspace_root(key).is_dir():
            os.replace(self.workspace_root(key), self.deleted / name)
        now = self.clock()
        os.utime(self.deleted / record.name, (now, now))  # the undo's time starts now
        self._moved(record, self.deleted / record.name)
        return True

    def undelete(self, key: str) -> bool:
        """Brings a deleted conversation back within the undo time; False when it is gone."""
        name = self.folder_id(key)
        record = self.deleted / f"{name}.json"
        if not record.is_file() or self._record(key).exists():
            return False
        if self.clock() - record.stat().st_mtime > self.undo_seconds:
            return False
        if (self.deleted / name).is_dir():
            os.replace(self.deleted / name, self.workspace_root(key))
        os.replace(record, self._record(key))
        self._moved(record, self._record(key))
        return True

    def _moved(self, old: Path, new: Path) -> None:
        if self._sizes is not None:
            self._sizes[new] = self._sizes.pop(old, 0) or self._size(new)
            self._owners[new] = self._owners.pop(old, "")

    def sweep(self, gone: Callable[[Path], object] = lambda root: None, *, keep: Collection[str] = ()) -> int:
        """Removes expired conversations, and deleted ones past their undo; then, over the cap,
        measures them all and trims (below). Returns how many. `gone(root)` is told each one's
        workspace root as it was used (to drop what else it left)."""
        removed = 0
        for record in self.root.glob("*.json"):
            try:
                updated = json.loads(record.read_text(encoding="utf-8")).get("updated")
            except (OSError, ValueError, AttributeError):
                updated = None
            if self._expired(updated):
                removed += self._remove(self.root, record.stem, gone)
        for record in self.deleted.glob("*.json"):
            if self.clock() - record.stat().st_mtime > self.undo_seconds:
                removed += self._remove(self.deleted, record.stem, gone)
        # Workspaces of conversations that were never saved (a page opened, a request refused).
        for folder in self.root.iterdir():
            if folder.is_dir() and folder != self.deleted and not folder.with_suffix(".json").exists():
                if self._expired(folder.stat().st_mtime):
                    shutil.rmtree(folder, ignore_errors=True)
        if self.max_bytes is not None:
            self._sizes = None  # measured again: workspaces grow between saves
            removed += self.trim(gone, keep=keep)
        return removed

    def trim(
        self,
        gone: Callable[[Path], object] = lambda root: None,
        *,
        keep: Collection[str] = (),
        caller: str | None = None,
        need: int = 0,
    ) -> int:
        """Over the cap (sizes as last measured), or short of `need` more bytes, removes the least
        recently updated conversations, deleted ones first, until the rest fits; never those of the
        keys in `keep`. On behalf of `caller` (caller_id), its own go first, and another caller's
        only while it holds less than its share of the cap (the cap over the callers on disk): one
        caller cannot push the others out. Returns how many."""
        if not self.would_pass(need):
            return 0
        sizes, kept = self._measured(), {self._record(k) for k in keep}
        limit = (self.max_bytes or 0) - need
        total, removed = sum(sizes.values()), 0
        # A deleted one (it waits for an undo) goes first, then by the time each was last saved.
        order = sorted(sizes, key=lambda p: (p.parent != self.deleted, _mtime(p)))
        if caller is not None:
            mine = [r for r in order if self._owners.get(r, "") == caller]
            share = (self.max_bytes or 0) // len({*self._owners.values(), caller})
            held = sum(sizes[r] for r in mine) + need
            order = mine + ([r for r in order if r not in mine] if held <= share else [])
        for record in order:
            if total <= limit:
                break
            if record not in kept:
                total -= sizes[record]
                removed += self._remove(record.parent, record.stem, gone)
        return removed

    def _measured(self) -> dict[Path, int]:
        if self._sizes is None:
            records = [*self.root.glob("*.json"), *self.deleted.glob("*.json")]
            self._sizes = {record: self._size(record) for record in records}
            self._owners = {record: str(_read(record).get("caller") or "") for record in records}
        return self._sizes

    @staticmethod
    def _size(record: Path) -> int:
        """The bytes of a conversation: its record, every file of its workspace, and the copies of
        them served to its pages (in Gradio's cache, outside the folder, yet on the same disk)."""
        size = _file_size(record)
        for folder, _, names in os.walk(record.with_suffix("")):
            size += sum(_file_size(Path(folder, name)) for name in names)
        return size + sum(_file_size(copy) for copy in _copies(record))

    def _remove(self, base: Path, name: str, gone: Callable[[Path], object]) -> int:
        record = base / f"{name}.json"
        for copy in _copies(record):  # each copy sits alone in its own random folder (webui.chat.files)
            shutil.rmtree(copy.parent, ignore_errors=True)
        record.unlink(missing_ok=True)
        shutil.rmtree(base / name, ignore_errors=True)
        if self._sizes is not None:
            self._sizes.pop(record, None)
        self._owners.pop(record, None)
        gone(self.root / name)
        return 1

    def _expired(self, updated: Any) -> bool:
        if not isinstance(updated, int | float):
            return True
        return self.clock() - updated > self.retention_seconds


def caller_id(caller: str) -> str:
    """Whose a saved conversation is, for the cap's shares: a hash, no address on disk."""
    return hashlib.sha256(("caller:" + caller).encode()).hexdigest()[:16]


def _read(record: Path) -> dict[str, Any]:
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


_COPY_FOLDER = re.compile(r"[0-9a-f]{32}")  # the random folder names webui.chat.files makes


def _copies(record: Path) -> list[Path]:
    """The served copies a record lists, each alone in a random folder (others are not ours)."""
    found = []
    for pair in _read(record).get("copies") or []:
        if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], str):
            copy = Path(pair[1])
            if copy.is_absolute() and _COPY_FOLDER.fullmatch(copy.parent.name):
                found.append(copy)
    return found


def _file_size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:  # gone meanwhile
        return 0


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
