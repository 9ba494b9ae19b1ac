"""Content hashes of files, folders and values: what the result cache keys on and replay compares.

A file's hash is remembered for as long as its size and modification time stay the same, so a
trace written several times during a run, or an upload used by several tasks, is read once.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from hugginggpt.files.artifacts import Artifact

_CHUNK = 1 << 20
_memo: dict[tuple[str, int, int], str] = {}
_memo_lock = threading.Lock()
_MEMO_LIMIT = 4096


def file_sha256(path: Path | str) -> str:
    """The SHA-256 of a file's bytes (hex). Raises OSError when it cannot be read."""
    path = Path(path).resolve()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _memo_lock:
        known = _memo.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    value = digest.hexdigest()
    with _memo_lock:
        if len(_memo) >= _MEMO_LIMIT:
            _memo.clear()
        _memo[key] = value
    return value


def value_sha256(value: Any) -> str:
    """The SHA-256 of a JSON value, written canonically (sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def artifact_sha256(artifact: Artifact) -> str | None:
    """A file's content hash, or a value's; None for a file that is gone."""
    if artifact.path is None:
        return value_sha256(artifact.value)
    try:
        return file_sha256(artifact.path)
    except OSError:
        return None


def folder_signature(folder: Path) -> str:
    """Cheap: every file's relative path, size and modification time. Changes when any file does."""
    rows = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(f for f in files if not f.startswith(".")):
            path = Path(root, name)
            st = path.stat()
            rows.append([path.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns])
    return value_sha256(rows)


def folder_sha256(folder: Path) -> str:
    """The content of every file in a folder (hidden ones aside), with its relative path."""
    rows = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(f for f in files if not f.startswith(".")):
            path = Path(root, name)
            rows.append([path.relative_to(folder).as_posix(), file_sha256(path)])
    return value_sha256(rows)
