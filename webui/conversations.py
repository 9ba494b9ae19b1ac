"""The conversations of the app's visitors, keyed by Gradio's session hash.

Each has its own workspace (a random folder name: the session hash is known to the browser, the
folder is not) and history, and runs one request at a time.
"""

from __future__ import annotations

import shutil
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hugginggpt.llm import Message
from hugginggpt.workspace import Workspace


@dataclass
class Conversation:
    workspace: Workspace
    history: list[Message] = field(default_factory=list)  # what the LLM sees of earlier turns
    display: list[dict[str, Any]] = field(default_factory=list)  # the chat as shown
    traces: list[str] = field(default_factory=list)
    requests: int = 0
    cancel: threading.Event | None = None  # set while a request runs

    def remove(self) -> None:
        """Stop its run and delete its files."""
        if self.cancel is not None:
            self.cancel.set()
        shutil.rmtree(self.workspace.root, ignore_errors=True)


class ConversationTable:
    """Conversations by session, the least recently used first; idle ones beyond `limit` are
    forgotten (API clients never "leave the page")."""

    def __init__(self, workdir: Path, *, limit: int = 500, welcome: Callable[[], list] = list):
        self.workdir = workdir
        self.limit = limit
        self.welcome = welcome
        self._by_session: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session: str) -> Conversation:
        """The session's conversation, made on first use."""
        evicted = []
        with self._lock:
            conv = self._by_session.get(session)
            if conv is None:
                conv = Conversation(Workspace.create(self.workdir, uuid.uuid4().hex), display=self.welcome())
                self._by_session[session] = conv
                idle = [k for k, c in self._by_session.items() if c.cancel is None and k != session]
                while len(self._by_session) > self.limit and idle:
                    evicted.append(self._by_session.pop(idle.pop(0)))
            self._by_session.move_to_end(session)
        for old in evicted:
            old.remove()
        return conv

    def find(self, session: str) -> Conversation | None:
        with self._lock:
            return self._by_session.get(session)

    def drop(self, session: str) -> None:
        """Forget a conversation, stop its run and delete its files."""
        with self._lock:
            conv = self._by_session.pop(session, None)
        if conv is not None:
            conv.remove()

    def claim(self, conv: Conversation, cancel: threading.Event) -> bool:
        """Mark a request as running in `conv`; False when one already is."""
        with self._lock:
            if conv.cancel is not None:
                return False
            conv.cancel = cancel
            return True

    def __len__(self) -> int:
        return len(self._by_session)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._by_session))

    def values(self) -> list[Conversation]:
        with self._lock:
            return list(self._by_session.values())
