"""The result cache: a task's outputs kept on disk under a key of everything that made them.

The key holds the task type, the model (its hub id and the revision in the local Hugging Face
cache, a local folder's content hash, or its endpoint URL), the endpoint policy, the inputs (text as
given, files by content hash, not by name; the seed is one of them) and the scope. The same task on
the same inputs with the same model is then served from disk, with no model load and no call; its
files are copied into the run's folder.

Bounded in bytes, least recently used out. Each entry is a folder staged aside and renamed into
place, so no reader sees half an entry; every change happens under a lock that holds across threads
and processes (a file lock), so concurrent requests never take the cache over its budget.
Scope "conversation" ties every entry to one conversation's folder, so on a public app a hit never
hands one visitor another's work; "process" shares entries among all conversations. A scope's
entries are listed under scopes/<hash of the scope>/, so they are deleted with their conversation
(`forget_scope`). Folders are made 0700 and files 0600: only the app's own user reads them.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hugginggpt.catalog import ModelCard
from hugginggpt.endpoints import CACHE, Call, Endpoint, Result, WrappedEndpoint
from hugginggpt.files.artifacts import Artifact
from hugginggpt.files.hashing import file_sha256, folder_sha256, folder_signature, value_sha256
from hugginggpt.observability import metrics

try:
    import fcntl
except ImportError:  # not on POSIX: threads are still serialised, processes are not
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

FORMAT = 1  # part of every key: raise it when keys or entries change, and old entries go unused
_META = "meta.json"

_thread_locks: dict[Path, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


class ResultCache:
    def __init__(self, root: Path, max_bytes: int):
        self.root = Path(root).expanduser().resolve()
        self.max_bytes = max_bytes
        self._folder_hashes: dict[tuple[str, str], str] = {}

    # ---- keys

    def key(
        self, *, scope: str, endpoint: str, task: str, model: ModelCard, inputs: Mapping[str, Any]
    ) -> str:
        """Raises OSError when an input file cannot be read."""
        normal = {name: normal_input(value) for name, value in inputs.items()}
        return value_sha256(
            {
                "format": FORMAT,
                "scope": scope,
                "endpoint": endpoint,
                "task": task,
                "model": model.id,
                "version": self.model_version(model),
                "inputs": normal,
            }
        )

    def model_version(self, model: ModelCard) -> str:
        """What changes when the model's weights do: a folder's content hash, a hub revision."""
        if model.tool is not None:  # what the tool claims to be, pinned when it was added
            return f"tool:{model.tool.hash}"
        if model.endpoint_url:
            return f"url:{model.endpoint_url}"
        folder = Path(model.source).expanduser()
        if folder.is_dir():
            return "folder:" + self._folder_hash(folder.resolve())
        if model.path:
            return f"missing-folder:{model.path}"
        return f"hub:{hub_revision(model.id) or 'unknown'}"

    def _folder_hash(self, folder: Path) -> str:
        """Hashing gigabytes of weights takes seconds: the result is kept, on disk too, for as long
        as no file in the folder changes size or time."""
        signature = folder_signature(folder)
        memo_key = (str(folder), signature)
        if memo_key in self._folder_hashes:
            return self._folder_hashes[memo_key]
        memo = self.root / "folders" / value_sha256(list(memo_key))
        try:
            value = memo.read_text(encoding="utf-8").strip()
        except OSError:
            value = ""
        if not value:
            value = folder_sha256(folder)
            try:
                _write_atomically(memo, value)
            except OSError as e:
                log.info("folder hash of %s not kept: %s", folder, e)
        self._folder_hashes[memo_key] = value
        return value

    # ---- entries

    def get(self, key: str, out_dir: Path) -> list[Artifact] | None:
        """The stored outputs, their files copied into `out_dir`; None when there is no entry."""
        entry = self.root / "entries" / key
        if not (entry / _META).is_file():
            metrics.cache_lookup(hit=False)
            return None
        with self._locked():
            try:
                meta = json.loads((entry / _META).read_text(encoding="utf-8"))
                outputs = _restore(meta, entry, Path(out_dir))
                _touch(entry / _META)  # now the most recently used
            except (OSError, ValueError, KeyError, TypeError) as e:  # damaged or gone: drop it
                log.warning("cache entry %s unusable, dropped: %s", key[:12], e)
                shutil.rmtree(entry, ignore_errors=True)
                metrics.cache_lookup(hit=False)
                return None
        metrics.cache_lookup(hit=True)
        return outputs

    def put(self, key: str, outputs: list[Artifact], *, scope: str | None = None) -> bool:
        """Store outputs under `key`, dropping least recently used entries to make room.
        False when they alone are larger than the budget. `scope`: listed under it (forget_scope)."""
        if self.max_bytes <= 0:
            return False
        staging = self.root / "staging" / uuid.uuid4().hex
        _private_dirs(staging)
        try:
            items = []
            for i, artifact in enumerate(outputs):
                if artifact.path is None:
                    items.append({"kind": str(artifact.kind), "value": artifact.value})
                    continue
                name = f"{i}{Path(artifact.path).suffix.lower()}"
                shutil.copyfile(artifact.path, staging / name)
                os.chmod(staging / name, 0o600)
                items.append({"kind": str(artifact.kind), "file": name, "name": Path(artifact.path).name})
            meta = {"format": FORMAT, "outputs": items, "scope": _scope_name(scope)}
            (staging / _META).write_text(json.dumps(meta), encoding="utf-8")
            os.chmod(staging / _META, 0o600)
            size = _entry_size(staging)
            if size > self.max_bytes:
                return False
            with self._locked():
                target = self.root / "entries" / key
                if target.exists():  # another request stored the same result meanwhile
                    return True
                self._evict(self.max_bytes - size)
                _private_dirs(target.parent)
                _touch(staging / _META)
                os.rename(staging, target)
                if scope is not None:
                    listed = self.root / "scopes" / _scope_name(scope)
                    _private_dirs(listed)
                    (listed / key).touch(mode=0o600)
            return True
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def forget_scope(self, scope: str) -> int:
        """Delete every entry stored under `scope` (a conversation that ended); how many went."""
        listed = self.root / "scopes" / _scope_name(scope)
        with self._locked():
            try:
                keys = [item.name for item in os.scandir(listed)]
            except FileNotFoundError:
                return 0
            for key in keys:
                shutil.rmtree(self.root / "entries" / key, ignore_errors=True)
            shutil.rmtree(listed, ignore_errors=True)
        return len(keys)

    def size(self) -> int:
        """Bytes the entries take."""
        with self._locked():
            return sum(size for _, size, _ in self._entries())

    def __len__(self) -> int:
        with self._locked():
            return len(self._entries())

    def clear(self) -> None:
        with self._locked():
            for sub in ("entries", "staging", "folders", "scopes"):
                shutil.rmtree(self.root / sub, ignore_errors=True)

    def _entries(self) -> list[tuple[int, int, Path]]:
        """(last used, bytes, folder) of every entry. Caller holds the lock."""
        found = []
        try:
            folders = list(os.scandir(self.root / "entries"))
        except FileNotFoundError:
            return []
        for item in folders:
            try:
                folder = Path(item.path)
                found.append(((folder / _META).stat().st_mtime_ns, _entry_size(folder), folder))
            except OSError:  # half removed: its bytes are going anyway
                continue
        return found

    def _evict(self, room: int) -> None:
        """Drop least recently used entries until they take at most `room` bytes. Caller holds the lock."""
        entries = sorted(self._entries(), key=lambda e: (e[0], e[2].name))
        total = sum(size for _, size, _ in entries)
        for _, size, folder in entries:
            if total <= room:
                break
            self._drop(folder)
            total -= size

    def _drop(self, folder: Path) -> None:
        """Delete an entry and its line in its scope's list. Caller holds the lock."""
        try:
            scope = json.loads((folder / _META).read_text(encoding="utf-8")).get("scope")
        except (OSError, ValueError, AttributeError):
            scope = None
        if isinstance(scope, str) and scope:
            (self.root / "scopes" / scope / folder.name).unlink(missing_ok=True)
        shutil.rmtree(folder, ignore_errors=True)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One change at a time: a thread lock per cache folder, and a file lock for other processes."""
        with _thread_locks_guard:
            lock = _thread_locks.setdefault(self.root, threading.Lock())
        with lock:
            _private_dirs(self.root)
            with open(self.root / ".lock", "a+b") as f:
                if fcntl is not None:
                    fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes
                yield


class CachingEndpoint(WrappedEndpoint):
    """Serves a task from the cache when it can; otherwise runs it on `inner` and stores the outputs.
    Whose entries a call shares is the call's (`Call.cache_scope`; None: run, keep nothing), so one
    wrapper serves every run; `scope` fixes it for every call instead (a resumed run's journal)."""

    def __init__(self, inner: Endpoint, cache: ResultCache, scope: str | None = None):
        super().__init__(inner)
        self.cache = cache
        self.scope = scope

    def run(self, task: str, model: ModelCard, inputs: dict[str, Any], call: Call) -> Result:
        scope = self.scope or call.cache_scope
        if scope is None:
            return self.inner.run(task, model, inputs, call)
        try:
            key = self.cache.key(scope=scope, endpoint=self.name, task=task, model=model, inputs=inputs)
        except OSError as e:  # an input that cannot be read: the model will say so, uncached
            log.info("not cached, an input cannot be read: %s", e)
            key = None
        if key is not None:
            hit = self.cache.get(key, call.out_dir)
            if hit is not None:
                return Result(outputs=hit, answered_by=CACHE)
        result = self.inner.run(task, model, inputs, call)
        if key is not None:
            try:
                self.cache.put(key, result.outputs, scope=None if scope == "process" else scope)
            except OSError as e:  # a full disk must not fail the task
                log.warning("result of %s on %s not cached: %s", task, model.id, e)
        return result


def hub_revision(model_id: str) -> str | None:
    """The commit of the hub model's snapshot in the local Hugging Face cache, if there is one."""
    from huggingface_hub import constants

    ref = Path(constants.HF_HUB_CACHE) / f"models--{model_id.replace('/', '--')}" / "refs" / "main"
    try:
        return ref.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def cache_root(cache_dir: str, workdir: str) -> Path:
    """The cache folder: the setting, or `.cache` beside the conversations' folders."""
    return Path(cache_dir) if cache_dir else Path(workdir) / ".cache"


def run_scope(given: str | None, setting: str, workspace_root: Path) -> str:
    """Whose entries a run shares: the one it was given (an API caller's key), else its
    conversation's folder (setting "conversation") or every conversation's ("process")."""
    return given or (str(workspace_root) if setting == "conversation" else "process")


def _scope_name(scope: str | None) -> str:
    """A scope as a folder name: its hash (a conversation's scope is its workspace path)."""
    return value_sha256(scope)[:32] if scope else ""


def _private_dirs(path: Path) -> None:
    """Make `path` (and missing parents) readable by the app's user only."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)


def normal_input(value: Any) -> Any:
    """An input as keys hold it: a file by its content hash, anything else as it is."""
    return {"file": file_sha256(value)} if isinstance(value, Path) else value


def _restore(meta: dict[str, Any], entry: Path, out_dir: Path) -> list[Artifact]:
    if meta.get("format") != FORMAT:
        raise ValueError(f"format {meta.get('format')!r}")
    outputs = []
    for item in meta["outputs"]:
        if "file" not in item:
            outputs.append(Artifact(item["kind"], value=item["value"]))
            continue
        _private_dirs(out_dir)
        target = _unused(out_dir / Path(item["name"]).name)
        shutil.copyfile(entry / item["file"], target)
        outputs.append(Artifact(item["kind"], path=target))
    return outputs


def _unused(path: Path) -> Path:
    n = 1
    candidate = path
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
    return candidate


def _touch(path: Path) -> None:
    """Mark as used now. The file system's own "now" can be a few milliseconds coarse; Python's is not."""
    now = time.time_ns()
    os.utime(path, ns=(now, now))


def _entry_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def _write_atomically(path: Path, text: str) -> None:
    _private_dirs(path.parent)
    partial = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.part")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
