"""A conversation's title as a person renames it: cleaned, bounded, and unique among the titles of
the same browser's conversations (a clash takes the next free number, as the page's list numbers
repeated titles: "caption this", "caption this (2)", ...)."""

from __future__ import annotations

from collections.abc import Iterable

from webui.chat.conversations import ConversationTable

MAX_TITLE = 60  # as long as a title made from a first request (webui.chat.engine)


def cleaned(text: str) -> str:
    """One line of printable words, at most MAX_TITLE characters; "" when nothing is left."""
    words = "".join(c if c.isprintable() else " " for c in str(text or "")).split()
    title = " ".join(words)
    return title if len(title) <= MAX_TITLE else title[: MAX_TITLE - 1] + "…"


def unique(title: str, taken: Iterable[str]) -> str:
    """`title`, or with the smallest number from 2 that no title in `taken` has."""
    taken = set(taken)
    n = 2
    named = title
    while named in taken:
        named, n = f"{title} ({n})", n + 1
    return named


def rename(table: ConversationTable, key: str, title: str) -> bool:
    """Gives the conversation `key` its new title, saved at once; False when it does not exist."""
    conv = table.find(key)
    if conv is None or conv.ended:
        return False
    conv.title = title
    table.save(conv)
    return True
