"""Typed outputs of tasks: files in the workspace, or values (text, structured data)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any


class ArtifactKind(StrEnum):
    """What a task produced. A str, so that it compares and serialises as its name."""

    TEXT = "text"
    IMAGE = "image"
    AUDIO = "audio"
    VIDEO = "video"
    DATA = "data"


MEDIA_KINDS = frozenset({ArtifactKind.IMAGE, ArtifactKind.AUDIO, ArtifactKind.VIDEO})


@dataclass(frozen=True)
class Artifact:
    kind: ArtifactKind
    path: Path | None = None  # set for media kinds: a file inside the conversation's workspace
    value: Any = None  # set for text (a str) and data (JSON-serialisable)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", ArtifactKind(self.kind))
        except ValueError:
            raise ValueError(f"unknown artifact kind {self.kind!r}") from None
        if (self.path is None) == (self.value is None):
            raise ValueError(f"an artifact has either a path or a value, got {self!r}")

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Artifact:
        """From the plain dicts that endpoints return: {kind, path} or {kind, value}."""
        path = raw.get("path")
        return cls(kind=raw["kind"], path=Path(path) if path is not None else None, value=raw.get("value"))

    def to_json(self, root: Path | None = None) -> dict[str, Any]:
        if self.path is not None:
            path = self.path.relative_to(root) if root and self.path.is_relative_to(root) else self.path
            return {"kind": str(self.kind), "path": str(path)}
        return {"kind": str(self.kind), "value": self.value}

    def describe(self, root: Path | None = None) -> str:
        """One line for the LLM and for logs."""
        if self.path is not None:
            return f"{self.kind} file {self.to_json(root)['path']}"
        text = self.value if isinstance(self.value, str) else repr(self.value)
        return f"{self.kind}: {text[:2000]}"


_SUFFIX_KINDS = {
    "image": (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff"),
    "audio": (".wav", ".flac", ".ogg", ".mp3", ".m4a"),
    "video": (".mp4", ".webm", ".mov", ".avi"),
}


def kind_of_file(name: str | Path) -> str | None:
    """image | audio | video by file suffix, None for anything else."""
    suffix = Path(name).suffix.lower()
    return next((kind for kind, suffixes in _SUFFIX_KINDS.items() if suffix in suffixes), None)
