"""Finding JSON in an LLM's reply, which may wrap it in thoughts or prose holding brackets of their own."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_MAX_STARTS = 200  # bounds the work on a long reply full of brackets


def first_json_value(text: str, accept: Callable[[Any], bool], *, starts: str = "[{") -> Any | None:
    """The first well-formed JSON value in `text`, starting at one of `starts`, that `accept` takes."""
    decoder = json.JSONDecoder()
    for match in list(re.finditer(f"[{re.escape(starts)}]", text))[:_MAX_STARTS]:
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        if accept(value):
            return value
    return None
