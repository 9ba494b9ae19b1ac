"""Render candidates for the LLM's model-selection prompt, cut to a token budget.

Every candidate gets an equal share of the budget, so K candidates always fit. Within a share the
id and counts come first (the LLM must name the id back), then facts, then the description, which
is the part that gets cut.
"""

from __future__ import annotations

from collections.abc import Sequence

from hugginggpt.catalog.card import ModelCard

CHARS_PER_TOKEN = 4  # a plain estimate; good enough for English-ish text and model ids


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def _counts(card: ModelCard) -> str:
    if not card.counts_known:
        return "downloads: n/a, likes: n/a"
    return f"downloads: {card.downloads}, likes: {card.likes}"


def _facts(card: ModelCard) -> list[str]:
    facts = []
    if card.library:
        facts.append(f"library: {card.library}")
    facts.append("runs locally" if card.local else "hosted")
    if card.size_bytes:
        facts.append(f"size: {card.size_bytes / 1e9:.1f} GB" if card.size_bytes >= 1e8 else "size: < 0.1 GB")
    if card.license:
        facts.append(f"license: {card.license}")
    if card.languages:
        facts.append("languages: " + ", ".join(card.languages[:6]))
    if card.tags:
        facts.append("tags: " + ", ".join(card.tags[:8]))
    return facts


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    if max_chars <= 3:
        return ""
    return text[: max_chars - 3].rstrip() + "..."


def render(card: ModelCard, *, max_chars: int) -> str:
    """One line for `card` of at most `max_chars` characters (the id alone may exceed a tiny budget)."""
    head = f'- "{card.id}" ({_counts(card)})'
    if len(head) > max_chars:
        return f'- "{card.id}"'  # never cut the id: the LLM must name it back intact
    line = head
    for fact in _facts(card):
        piece = f"; {fact}"
        if len(line) + len(piece) > max_chars:
            break
        line += piece
    description = " ".join(card.description.split())
    if description:
        room = max_chars - len(line) - 2
        cut = _cut(description, room)
        if cut:
            line += f": {cut}"
    return line


def prompt_lines(cards: Sequence[ModelCard], *, max_tokens: int) -> list[str]:
    """One line per card; all lines together stay within about `max_tokens` tokens."""
    if not cards:
        return []
    share = max(1, max_tokens // len(cards)) * CHARS_PER_TOKEN - 1  # -1: the newline joining lines
    return [render(card, max_chars=share) for card in cards]
