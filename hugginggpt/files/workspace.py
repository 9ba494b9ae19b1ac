"""One folder per conversation. Every file a task reads or writes lives inside it.

Layout: <root>/uploads/ (the user's files, by name), <root>/outputs/<request>/ (what tasks made),
<root>/traces/<request>.json. Folders are made 0700 and uploads 0600: only the app's own user reads
a conversation's files.
"""

from __future__ import annotations

import filecmp
import re
import shutil
import uuid
from pathlib import Path

from hugginggpt.files.artifacts import kind_of_file


class FileRefused(ValueError):
    """A path the LLM or a user named is not a file of this conversation."""


class Workspace:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        for sub in ("uploads", "outputs", "traces"):
            (self.root / sub).mkdir(mode=0o700, exist_ok=True)

    @classmethod
    def create(cls, base: Path, conversation_id: str | None = None) -> Workspace:
        """A fresh workspace (or the existing one of `conversation_id`) under `base`."""
        name = conversation_id or uuid.uuid4().hex
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            raise ValueError(f"not a valid conversation id: {name!r}")
        return cls(Path(base) / name)

    @property
    def uploads_dir(self) -> Path:
        return self.root / "uploads"

    def add_upload(self, source: Path) -> Path:
        """Copy a user's file in under a safe, unused name; return its path in the workspace.
        A file already among the uploads, or the same bytes under the same name, is not copied again."""
        source = Path(source)
        if source.resolve().parent == self.uploads_dir.resolve() and source.is_file():
            return source.resolve()
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", source.stem)[:60].strip("._") or "file"
        suffix = re.sub(r"[^A-Za-z0-9.]", "", source.suffix)[:10].lower()
        target = self.uploads_dir / f"{stem}{suffix}"
        n = 1
        while target.exists():
            if _same_bytes(target, source):
                return target
            n += 1
            target = self.uploads_dir / f"{stem}-{n}{suffix}"
        shutil.copyfile(source, target)
        target.chmod(0o600)
        return target

    def run_dir(self, request_id: str) -> Path:
        path = self.root / "outputs" / request_id
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path

    def trace_path(self, request_id: str) -> Path:
        return self.root / "traces" / f"{request_id}.json"

    def files(self) -> dict[str, Path]:
        """Names the LLM may use for media files: uploads by file name, outputs by relative path."""
        # A link leading out of the workspace is no file of this conversation: left out, never followed.
        named = {p.name: p for p in sorted(self.uploads_dir.iterdir()) if p.is_file() and self.contains(p)}
        for p in sorted((self.root / "outputs").rglob("*")):
            if p.is_file() and kind_of_file(p) and self.contains(p):
                named[p.relative_to(self.root).as_posix()] = p
        return named

    def relative(self, path: Path) -> str:
        return Path(path).resolve().relative_to(self.root).as_posix()

    def resolve(self, name: str) -> Path:
        """The file of this conversation that `name` refers to, or FileRefused.

        Accepts an upload's name or a path relative to the workspace. Refuses absolute paths,
        traversal, links that lead outside, and anything that is not an existing file here.
        """
        text = name.strip()
        if not text or "\x00" in text:
            raise FileRefused("an empty file name")
        if text.lower().startswith("file:") or re.match(r"^[a-z][a-z0-9+.-]*://", text, re.I):
            raise FileRefused(f"'{name}' is not a file of this conversation")
        relative = text.lstrip("/")  # "/photo.jpg" is how HuggingGPT plans name uploads
        for candidate in (self.uploads_dir / relative, self.root / relative, Path(text)):
            if self.contains(candidate) and candidate.is_file():
                return candidate.resolve()
        if Path(text).is_absolute() or ".." in Path(text).parts:
            raise FileRefused(f"'{name}' is outside this conversation's files")
        raise FileRefused(f"'{name}' is not a file of this conversation")

    def contains(self, path: Path) -> bool:
        """Whether `path`, links resolved, lies inside this workspace."""
        try:
            return Path(path).resolve().is_relative_to(self.root)
        except (OSError, RuntimeError):
            return False


def _same_bytes(a: Path, b: Path) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    return filecmp.cmp(a, b, shallow=False)
