"""OpenAI chat messages in, HuggingGPT's request out; and the run back as OpenAI's answer parts.

The last user message is the request, its image_url and input_audio parts its new files. Earlier
user and assistant turns become the history the LLM sees; the files of earlier user turns come too
(available to the plan by name, not "attached to this message"), the newest first when there are
more than a request may bring. System and developer messages are not used: HuggingGPT's prompts
are its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hugginggpt.files.artifacts import ArtifactKind
from hugginggpt.llms.interface import Message
from webui.doors.api_files import MAX_FILES, InputRefused, Served
from webui.doors.calls import FileRef, Finished

ROLES = ("system", "developer", "user", "assistant", "tool", "function")


@dataclass
class Conversation:
    request: str
    files: list[FileRef] = field(default_factory=list)
    history: list[Message] = field(default_factory=list)


def read_messages(messages: Any) -> Conversation:
    """The request, its files and the history; InputRefused says what is wrong with the messages."""
    if not isinstance(messages, list) or not messages:
        raise InputRefused("'messages' must be a non-empty list of messages.")
    turns: list[tuple[str, str, list[FileRef]]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise InputRefused(f"messages[{i}] must be an object with a role ({', '.join(ROLES)}).")
        role = message["role"]
        text, files = _content(message.get("content"), f"messages[{i}]", media=role == "user")
        if role in ("user", "assistant"):
            turns.append((role, text, files))
    if not turns or turns[-1][0] != "user":
        raise InputRefused("The last message must be the user's request.")
    _, request, new = turns[-1]
    if not request:
        raise InputRefused("The last user message has no text: say what to do with its files.")
    if len(new) > MAX_FILES:
        raise InputRefused(f"{len(new)} files were sent; at most {MAX_FILES} are accepted per request.")
    earlier = [FileRef(f.ref, f.hint, earlier=True) for _, _, files in turns[:-1] for f in files]
    room = MAX_FILES - len(new)
    earlier = earlier[-room:] if room > 0 else []  # the newest of them
    history: list[Message] = [
        {"role": role, "content": text or "(files only)"} for role, text, _ in turns[:-1]
    ]
    return Conversation(request, earlier + new, history)


def _content(content: Any, where: str, *, media: bool) -> tuple[str, list[FileRef]]:
    if content is None:
        return "", []
    if isinstance(content, str):
        return content.strip(), []
    if not isinstance(content, list):
        raise InputRefused(f"{where}.content must be a string or a list of content parts.")
    texts, files = [], []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("text", "input_text", "output_text", "refusal"):
            texts.append(str(part.get(kind if kind == "refusal" else "text") or ""))
        elif kind == "image_url" and media:
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            if not isinstance(url, str) or not url.strip():
                raise InputRefused(f"{where}.content[{j}].image_url needs a url.")
            files.append(FileRef(url, "image"))
        elif kind == "input_audio" and media:
            audio = part.get("input_audio")
            data = audio.get("data") if isinstance(audio, dict) else None
            if not isinstance(data, str) or not data.strip():
                raise InputRefused(f"{where}.content[{j}].input_audio needs base64 data.")
            files.append(FileRef(data, "audio"))
        else:
            raise InputRefused(
                f"{where}.content[{j}] has type {kind!r}: text, image_url and input_audio parts are "
                "accepted (files in user messages only)."
            )
    return "\n".join(t.strip() for t in texts if t.strip()), files


# ---- the run, back ---------------------------------------------------------------------------


def files_markdown(finished: Finished) -> str:
    """The generated files, linked: images shown inline, audio and video as links."""
    lines = []
    for record in finished.records:
        for a in record.outputs:
            copy: Served | None = finished.served.get(Path(a.path)) if a.path is not None else None
            if copy is None:
                continue
            label = f"task {record.id} · {record.task} · {a.kind}"
            lines.append(
                f"![{label}]({copy.url})" if a.kind == ArtifactKind.IMAGE else f"[{label}]({copy.url})"
            )
    return "\n\n---\n" + "\n\n".join(lines) if lines else ""
