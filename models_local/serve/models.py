"""Which models a server offers, and which folder or hub id each model id stands for.

A models folder holds one folder per model, named by its id: `DIR/name` or `DIR/owner/name`
(a hub snapshot copied there, a fine-tune, ...). Hub ids not found there are loaded through the HF
cache, as the in-process runtime does, unless the server was started without the hub. A model id
comes from a URL: it never names a path outside the models folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from models_local.handlers import HANDLERS

# owner/name or name, as the Hub spells repo ids: letters, digits, "-", "_", "."; no "..".
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?$")
_MODEL_FILES = ("config.json", "model_index.json", "modules.json")


class UnknownModel(LookupError):
    """Not a model this server offers; the message says why."""


def _is_id(model_id: str) -> bool:
    return bool(_HUB_ID.match(model_id)) and ".." not in model_id


def _is_model(folder: Path) -> bool:
    return folder.is_dir() and any((folder / name).is_file() for name in _MODEL_FILES)


def pipeline_tag(folder: Path) -> str | None:
    """The task a model card (README.md front matter) declares, when the runtime serves it."""
    readme = folder / "README.md"
    if not readme.is_file():
        return None
    text = readme.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---"):
        return None
    front = text[3:].split("\n---", 1)[0]
    found = re.search(r"^pipeline_tag:\s*['\"]?([\w-]+)", front, re.MULTILINE)
    tag = found.group(1) if found else None
    return tag if tag in HANDLERS else None


@dataclass(frozen=True)
class ModelTable:
    models_dir: Path | None = None
    hub: bool = True  # hub ids not in models_dir are fetched through the HF cache

    def folders(self) -> dict[str, Path]:
        """id -> folder for every model in the models folder (read afresh: models may be added)."""
        found: dict[str, Path] = {}
        root = self.models_dir
        if root is None or not root.is_dir():
            return found
        for child in sorted(root.iterdir()):
            if child.name.startswith("."):
                continue
            if _is_model(child):
                found[child.name] = child
            elif child.is_dir():
                for grandchild in sorted(child.iterdir()):
                    if not grandchild.name.startswith(".") and _is_model(grandchild):
                        found[f"{child.name}/{grandchild.name}"] = grandchild
        return found

    def folder(self, model_id: str) -> Path | None:
        """The folder folders() would list for `model_id`, looked up directly: a call's few stats
        instead of a listing of the whole models folder. None for what is no model id."""
        root = self.models_dir
        if root is None or not _is_id(model_id):
            return None
        parts = model_id.split("/")
        if len(parts) == 2 and _is_model(root / parts[0]):  # a model's own subfolder is no model
            return None
        candidate = root.joinpath(*parts)
        return candidate if _is_model(candidate) else None

    def resolve(self, model_id: str, *, files: bool = True) -> str:
        """What the runtime loads for `model_id`: its folder here, else the hub id itself.
        `files=False`: a task whose handler needs no files (an edge detector) takes any id."""
        if not _is_id(model_id):
            raise UnknownModel(f"{model_id!r} is not a model id (owner/name or name)")
        if not files:
            return model_id
        folder = self.folder(model_id)
        if folder is not None:
            return str(folder.resolve())
        if not self.hub:
            raise UnknownModel(f"{model_id} is not in this server's models folder")
        if Path(model_id).exists():  # the runtime would read a relative path as a local folder
            raise UnknownModel(f"{model_id} is not in this server's models folder")
        return model_id

    def id_of(self, source: str) -> str:
        """The model id for what the runtime loaded (a folder here, or a hub id)."""
        by_folder = {str(folder.resolve()): model_id for model_id, folder in self.folders().items()}
        return by_folder.get(source, source)

    def task_of(self, model_id: str) -> str | None:
        """The task the model's card declares (README.md pipeline_tag), if any."""
        folder = self.folder(model_id)
        return pipeline_tag(folder) if folder is not None else None

    def listing(self) -> list[dict]:
        return [{"id": model_id, "task": pipeline_tag(folder)} for model_id, folder in self.folders().items()]
