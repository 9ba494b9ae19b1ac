"""What the page keeps per visitor, without Gradio: which conversation each browser session has open.

A browser names its conversation by a key it keeps (webui.page.saved); a client without a browser store
(gradio_client) is keyed by its session. Nothing here makes a conversation: the chat engine does
(webui.chat.engine.ChatApp.conversation), on a first message.
"""

from __future__ import annotations

from typing import Any

from webui.chat.engine import ChatApp
from webui.page import saved


class Visitors:
    def __init__(self, chat: ChatApp):
        self.chat = chat
        self._open: dict[str, str] = {}  # session hash -> the conversation key its page has open

    def key(self, conv_key: str, session: str) -> str:
        """The conversation a request of `session` is about: the page's key, or the session's own."""
        if saved.valid_key(conv_key):
            self._open[session] = conv_key
            return conv_key
        return session

    def of(self, conv_key: str, request: Any) -> str:
        """`key` for a Gradio request: its browser session's (gr.Request.session_hash)."""
        return self.key(conv_key, getattr(request, "session_hash", None) or "local")

    def opened(self, session: str, key: str) -> None:
        self._open[session] = key

    def shows(self, session: str, key: str) -> bool:
        """Whether the page of `session` still has `key` open (it may have opened another since)."""
        return self._open.get(session) == key

    def restored(self, store: Any, session: str) -> tuple[str, dict[str, Any]]:
        """A page (re)load: the conversation the browser had open if the server still has it, else a
        new key (made into a conversation by its first message); the store as it now is."""
        store = saved.normal(store)
        key = store["current"]
        if not key or self.chat.find(key) is None:
            store = saved.forget(store, key) if key else store
            key = saved.new_key()
            store = saved.open_key(store, key)
        self._open[session] = key
        return key, store

    def left(self, session: str) -> str | None:
        """The page of `session` went away: the key it had open (None: no browser store)."""
        return self._open.pop(session, None)

    def __len__(self) -> int:
        return len(self._open)
