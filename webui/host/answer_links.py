"""Generated files named in an answer become links: the LLM writes a file's name in the
conversation's folder (`outputs/<request>/task-1/x.png`), which means nothing to a browser or an API
client; each name of a file that exists becomes a link to where it is served."""

from __future__ import annotations

import re
from collections.abc import Callable

# A name the answer prompt gives the LLM, in backticks or bare; sentence punctuation stays outside.
OUTPUT_NAME = re.compile(r"`?(outputs/[\w./-]*\w\.[A-Za-z0-9]{2,5})\b`?")


def link_outputs(text: str, url_for: Callable[[str], str | None]) -> str:
    """`text` with each output name that `url_for` knows as a markdown link to its URL."""

    def swap(m: re.Match[str]) -> str:
        url = url_for(m.group(1))
        return f"[{m.group(1)}]({url})" if url else m.group(0)

    return OUTPUT_NAME.sub(swap, text)
