"""Paths in a saved conversation's record: relative to its workspace on disk, absolute in memory
(webui.chat.conversations); a saved relative path never leads outside the workspace."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def map_paths(messages: list[dict[str, Any]], change: Callable[[str], str]) -> list[dict[str, Any]]:
    """`messages` with the path of every file part changed by `change`."""

    def part(content: Any) -> Any:
        if isinstance(content, list):
            return [part(c) for c in content]
        if isinstance(content, dict) and isinstance(content.get("path"), str):
            return {**content, "path": change(content["path"])}
        return content

    return [{**m, "content": part(m.get("content"))} for m in messages]


def relative(path: str | Path, root: Path) -> str:
    resolved = Path(path).resolve()
    return resolved.relative_to(root).as_posix() if resolved.is_relative_to(root) else str(path)


def absolute(path: str, root: Path) -> str:
    """A saved path as a real one; a relative one must stay inside the workspace."""
    if Path(path).is_absolute():
        return path
    resolved = (root / path).resolve()
    return str(resolved) if resolved.is_relative_to(root) else str(root / "missing")
