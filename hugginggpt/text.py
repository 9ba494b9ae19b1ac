"""Small text helpers shared by the controller's modules."""

from __future__ import annotations


def shorten(text: object, limit: int = 300) -> str:
    """One line of at most `limit` characters: whitespace collapsed, the rest cut with '...'."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
