"""Stage 4: the answer, streamed, written from the execution record."""

from __future__ import annotations

import re
import threading
from collections.abc import Generator, Sequence

from . import prompts
from .events import AnswerDelta
from .llm import LLM, Message
from .records import TaskRecord
from .workspace import Workspace

# Things in an answer that look like file paths: a name with a media or data suffix.
_FILE_MENTION = re.compile(r"[\w./-]+\.(?:png|jpe?g|gif|webp|bmp|wav|flac|ogg|mp3|mp4|webm)\b", re.I)


def respond_steps(
    llm: LLM,
    request: str,
    records: Sequence[TaskRecord],
    workspace: Workspace,
    history: Sequence[Message],
    cancelled: threading.Event,
) -> Generator[AnswerDelta, None, str]:
    """Stream the answer piece by piece; returns it whole. Stops reading once `cancelled` is set.

    A file the answer names that does not exist gets a note at the end."""
    parts: list[str] = []
    for delta in llm.stream(answer_messages(request, records, workspace, history), stage="respond"):
        if cancelled.is_set():
            return
        parts.append(delta)
        yield AnswerDelta(delta)
    invented = missing_files("".join(parts), workspace)
    if invented:
        note = f"\n\n(Note: {', '.join(invented)} named above does not exist; no such file was made.)"
        parts.append(note)
        yield AnswerDelta(note)
    return "".join(parts)


def answer_messages(
    request: str, records: Sequence[TaskRecord], workspace: Workspace, history: Sequence[Message] = ()
) -> list[Message]:
    tasks = [
        {
            "id": r.id,
            "task": r.task,
            "model": r.model,
            "status": str(r.status),
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
