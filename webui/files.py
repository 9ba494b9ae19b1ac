"""A conversation's files as the browser gets them.

Gradio serves files from its cache folder to anyone who has the URL. So every file a conversation
shows is copied there under a random folder name (128 bits: a URL nobody can guess or list), the
copy is recorded on the conversation, and every copy is deleted when the conversation ends (page
left, cleared, idle time-out); a fetch of it then fails. The workspace itself is never served.

Uploads are copied too: Gradio names an upload by its content, so two visitors who send the same
picture share one upload path, and deleting it with one conversation would break the other's.
Gradio's own sweep (`delete_cache` in app.py) removes the originals.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path
from typing import Any

from .conversations import Conversation


class Publisher:
    def __init__(self, cache_dir: Path):
        self.cache_dir = Path(cache_dir).resolve()

    def messages(self, conv: Conversation, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`messages` with each file replaced by the conversation's own served copy."""
        return [{**m, "content": self._content(conv, m.get("content"))} for m in messages]

    def _content(self, conv: Conversation, content: Any) -> Any:
        if isinstance(content, list):  # a message of several parts (text and files)
            return [self._content(conv, part) for part in content]
        if isinstance(content, dict) and content.get("path"):
            if not Path(content["path"]).is_file():  # e.g. a file of a conversation saved long ago
                return f"*({Path(content['path']).name} is no longer available.)*"
            return {**content, "path": self.file(conv, content["path"])}
        return content

    def file(self, conv: Conversation, path: str | Path) -> str:
        source = Path(path).resolve()
        copy = conv.copies.get(source)
        if copy is None or not copy.is_file():
            copy = self.cache_dir / secrets.token_hex(16) / source.name
            copy.parent.mkdir(parents=True)
            shutil.copyfile(source, copy)
            conv.copies[source] = copy
            conv.served.add(copy)
        return str(copy)
