"""Which library a model needs and whether the local runtime could run it (a cheap rule, no I/O).

The runtime itself (models_local.can_run) has the last word; this rule sets the catalog's `local`
hint for entries that do not state it, so that selection can prefer models we can run here.
"""

from __future__ import annotations

from hugginggpt.tasks import TASKS

# Libraries whose models models_local loads (RUNTIME_CONTRACT.md; its runtime also takes
# sentence-transformers folders through transformers, sklearn for tables, and "builtin" for a
# control image made without weights, e.g. Canny edges).
LOCAL_LIBRARIES = frozenset({"transformers", "diffusers", "sentence-transformers", "sklearn", "builtin"})


def is_local(task: str, library: str | None) -> bool:
    return library in LOCAL_LIBRARIES and task in TASKS


def folder_library(path: str) -> str | None:
    """The library a saved model folder was written by: diffusers pipelines have model_index.json."""
    from pathlib import Path

    folder = Path(path)
    if (folder / "model_index.json").is_file():
        return "diffusers"
    if (folder / "config.json").is_file():
        return "transformers"
    return None
