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
from urllib.parse import quote

from hugginggpt.files.workspace import FileRefused
from webui.chat.conversations import Conversation
from webui.host.answer_links import link_outputs


class Publisher:
    def __init__(self, cache_dir: Path):
        self.cache_dir = Path(cache_dir).resolve()

    def messages(self, conv: Conversation, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`messages` with each file replaced by the conversation's own served copy, and each
        generated file an answer names linked to it."""
        out = []
        for m in messages:
            content = self._content(conv, m.get("content"))
            if m.get("role") == "assistant" and isinstance(content, str):
                content = link_outputs(content, lambda name: self._url(conv, name))
            out.append({**m, "content": content})
        return out

    def _url(self, conv: Conversation, name: str) -> str | None:
        """The page-relative URL of the served copy of the conversation's file `name`, if there is one."""
        try:
            path = conv.workspace.resolve(name)
        except FileRefused:
            return None
        return "gradio_api/file=" + quote(self.file(conv, path))

    def _content(self, conv: Conversation, content: Any) -> Any:
        if isinstance(content, list):  # a message of several parts (text and files)
            return [self._content(conv, part) for part in content]
        if isinstance(content, dict) and content.get("path"):
            try:
                return {**content, "path": self.file(conv, content["path"])}
            except FileNotFoundError:  # a conversation saved long ago, an upload its run refused
                return f"*({Path(content['path']).name} is no longer available.)*"
        return content

    def file(self, conv: Conversation, path: str | Path) -> str:
        source = Path(path).resolve()
        copy = conv.copies.get(source)
        if copy is None or not copy.is_file():
            copy = self.cache_dir / secrets.token_hex(16) / source.name
            copy.parent.mkdir(mode=0o700, parents=True)
            shutil.copyfile(source, copy)
            copy.chmod(0o600)
            conv.copies[source] = copy
            conv.served.add(copy)
        return str(copy)
