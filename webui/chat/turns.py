"""A conversation's turns, and a turn done again in place.

A turn is one request: the person's bubble and everything the app answered to it. Each turn knows
where it starts in the chat as shown and in the history the LLM sees, so that regenerating, editing
the plan or editing the request's words can do the turn again where it stands: the earlier answer
folds into a closed "Version N" box inside the turn (nothing is lost), the new one follows it, and
the LLM's history forgets the replaced exchange. Editing an earlier request folds the later turns
into that box too, the person's words among them as quotes.

No Gradio here: messages are the plain dicts of webui.chat.render.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

VERSION_ID = "version-"  # the id of a fold box begins with it


@dataclass
class Turn:
    start: int  # the index of its first message (the person's bubble) in the chat as shown
    history: int  # how many history messages there were before it
    text: str  # the request's words

    def to_json(self) -> list[Any]:
        return [self.start, self.history, self.text]

    @classmethod
    def from_json(cls, raw: Any) -> Turn | None:
        if isinstance(raw, list) and len(raw) == 3 and all(isinstance(n, int) and n >= 0 for n in raw[:2]):
            return cls(raw[0], raw[1], str(raw[2]))
        return None


def open_turn(conv: Any, user: list[dict[str, Any]], text: str, *, replace: int | None = None, why: str = ""):
    """Begins a turn in the conversation `conv` (webui.chat.conversations): its chat, history and turns
    as `opened` makes them. A new turn has no plan to edit or regenerate until it runs one."""
    conv.display, conv.history, conv.turns = opened(
        conv.display, conv.history, conv.turns, user, text, replace=replace, why=why
    )
    if replace is None:
        conv.last_run = None
    conv.resumable = None  # a run cut off by a restart is continued, or replaced, by this one


def history_before(history: list[Any], turns: list[Turn], replace: int | None) -> list[Any]:
    """What the LLM may see for a request: the history, or with `replace` the part before that turn."""
    if replace is None or not 0 <= replace < len(turns):
        return list(history)
    return list(history[: turns[replace].history])


def opened(
    display: list[dict[str, Any]],
    history: list[Any],
    turns: list[Turn],
    user: list[dict[str, Any]],
    text: str,
    *,
    replace: int | None = None,
    why: str = "",
) -> tuple[list[dict[str, Any]], list[Any], list[Turn]]:
    """The chat, the history and the turns with a new turn begun by the bubble `user`. With `replace`
    (a turn's index), that turn is done again: what it answered, and every later turn, folds into a
    closed box titled with `why`; an empty `user` keeps its bubble (a regenerate: same request)."""
    if replace is None or not 0 <= replace < len(turns):
        return display + user, history, [*turns, Turn(len(display), len(history), text)]
    old = turns[replace]
    asked = request_end(display, old)
    bubble = user or display[old.start : asked]
    earlier, answered = _split_versions(display[asked:])
    n = len(earlier) + 1
    title = f"Version {n}" + (f" · replaced: {why}" if why else " · replaced")
    folded = fold(answered, title) if answered else []
    kept = [m for versions in earlier for m in versions]
    turn = Turn(old.start, old.history, text or old.text)
    return display[: old.start] + bubble + kept + folded, history[: old.history], [*turns[:replace], turn]


def fold(messages: list[dict[str, Any]], title: str) -> list[dict[str, Any]]:
    """`messages` in one closed box: top-level messages nest in it (a nested one keeps its box), the
    person's bubbles become quotes (a box holds the app's messages only), options are dropped."""
    box_id = f"{VERSION_ID}{uuid.uuid4().hex[:12]}"
    meta = {"title": title, "id": box_id, "status": "done"}
    out: list[dict[str, Any]] = [{"role": "assistant", "content": "", "metadata": meta}]
    for m in messages:
        meta = dict(m.get("metadata") or {})
        meta.setdefault("parent_id", box_id)
        content = m.get("content")
        if m.get("role") == "user":
            content = _quoted(content)
        # One message per part: Gradio (6.31) shows only the first part of a nested message, so a
        # caption and its image or audio would lose the media once folded.
        for n, part in enumerate(_parts(content)):
            part_meta = meta if n == 0 else {"parent_id": meta["parent_id"]}
            out.append({"role": "assistant", "content": part, "metadata": part_meta})
    return out


def _parts(content: Any) -> list[Any]:
    if not isinstance(content, list):
        return [content]
    return [part for item in content for part in _parts(item)] or [""]


def index_of(turns: list[Turn], message: int) -> int | None:
    """The turn that the chat's message number `message` belongs to."""
    found = None
    for i, turn in enumerate(turns):
        if turn.start <= message:
            found = i
    return found


def request_end(display: list[dict[str, Any]], turn: Turn) -> int:
    """Where the person's messages that begin `turn` end in the chat (its answer begins)."""
    end = turn.start
    while end < len(display) and display[end].get("role") == "user":
        end += 1
    return end


Messages = list[dict[str, Any]]


def _split_versions(messages: Messages) -> tuple[list[Messages], Messages]:
    """The turn's earlier versions (each a box and what nests in it), then its current answer."""
    versions: list[list[dict[str, Any]]] = []
    i = 0
    while i < len(messages):
        meta = messages[i].get("metadata") or {}
        box = meta.get("id")
        if not (isinstance(box, str) and box.startswith(VERSION_ID) and not meta.get("parent_id")):
            break
        end = i + 1
        while end < len(messages) and (messages[end].get("metadata") or {}).get("parent_id"):
            end += 1  # everything nested under the box (directly or deeper) follows it
        versions.append(messages[i:end])
        i = end
    return versions, messages[i:]


def _quoted(content: Any) -> Any:
    if isinstance(content, str):
        return "**You asked:** " + content
    return ["**You sent:**", content]
