"""Stage 4: the answer, streamed, written from the execution record."""

from __future__ import annotations

import re
import threading
from collections.abc import Generator, Sequence

from hugginggpt import prompts
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.interface import LLM, Message
from hugginggpt.run.events import AnswerDelta
from hugginggpt.run.records import TaskRecord

# Words of an answer that may be file paths or web addresses. Each match consumes its characters,
# so finding them all takes time linear in the answer (a pattern that starts anywhere in a long run
# of letters and scans it to the end, as a suffix test at the end of the pattern does, is quadratic).
_WORD = re.compile(r"[\w./:+-]+")
_MEDIA_SUFFIX = re.compile(r"\.(?:png|jpe?g|gif|webp|bmp|wav|flac|ogg|mp3|mp4|webm)$", re.I)
MAX_CHECKED_CHARS = 200_000  # of an answer, for invented file names


def respond_steps(
    llm: LLM,
    request: str,
    records: Sequence[TaskRecord],
    workspace: Workspace,
    history: Sequence[Message],
    cancelled: threading.Event,
    *,
    max_tokens: int | None = None,
    max_chars: int | None = None,
) -> Generator[AnswerDelta, None, str | None]:
    """Stream the answer piece by piece. Stops reading once `cancelled` is set.

    A file the answer names that does not exist gets a note at the end. Returns why the answer is
    incomplete (the stream ended early or broke, or was cut at the size limit), or None."""
    parts: list[str] = []
    messages = answer_messages(request, records, workspace, history)
    stream = llm.stream(messages, stage="respond", max_tokens=max_tokens, max_chars=max_chars)
    while True:
        try:
            delta = next(stream)
        except StopIteration as end:
            cut = end.value.cut
            break
        if cancelled.is_set():
            stream.close()
            return None
        parts.append(delta)
        yield AnswerDelta(delta)
    invented = missing_files("".join(parts), workspace)
    if invented:
        note = f"\n\n(Note: {', '.join(invented)} named above does not exist; no such file was made.)"
        yield AnswerDelta(note)
    return cut


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
    known: set[str] = set()
    for name, path in workspace.files().items():
        known.update((name, path.name))
    mentions: dict[str, None] = {}
    for match in _WORD.finditer(answer, 0, MAX_CHECKED_CHARS):
        word = match.group().rstrip(".:")
        if "://" in word or not _MEDIA_SUFFIX.search(word):
            continue  # web addresses are not files
        mentions[word.rsplit(":", 1)[-1]] = None
    return [m for m in mentions if m.lstrip("./") not in known]
