"""Stage 4: the answer, streamed, written from the execution record."""

from __future__ import annotations

import re

from . import prompts
from .execute import TaskRecord
from .llm import Message
from .workspace import Workspace

# Things in an answer that look like file paths: a name with a media or data suffix.
_FILE_MENTION = re.compile(r"[\w./-]+\.(?:png|jpe?g|gif|webp|bmp|wav|flac|ogg|mp3|mp4|webm)\b", re.I)


def answer_messages(
    request: str, records: list[TaskRecord], workspace: Workspace, history: list[Message] = ()
) -> list[Message]:
    tasks = [
        {
            "id": r.id,
            "task": r.task,
            "model": r.model,
            "status": r.status,
            "error": r.error,
            "outputs": [a.describe(workspace.root) for a in r.outputs],
        }
        for r in records
    ]
    return [
        {"role": "system", "content": prompts.render("respond", "system")},
        *history,
        {"role": "user", "content": prompts.render("respond", "user", request=request, tasks=tasks)},
    ]


def missing_files(answer: str, workspace: Workspace) -> list[str]:
    """File paths the answer names that do not exist in the workspace (the LLM made them up)."""
    known = set()
    for name, path in workspace.files().items():
        known.update((name, path.name))
    local = re.sub(
        r"\b[a-z][a-z0-9+.-]*://\S+", " ", answer, flags=re.IGNORECASE
    )  # web addresses are not files
    return [m for m in dict.fromkeys(_FILE_MENTION.findall(local)) if m.lstrip("./") not in known]
