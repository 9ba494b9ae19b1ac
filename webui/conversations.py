"""The conversations of the app's visitors, keyed by Gradio's session hash.

Each has its own workspace (a random folder name: the session hash is known to the browser, the
folder is not) and history, and runs one request at a time.
"""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from hugginggpt.cache import ResultCache
from hugginggpt.llm import Message
from hugginggpt.workspace import Workspace

from .review_form import Draft


class TableFull(RuntimeError):
    """No room for another conversation now; the message says so in the visitor's words."""


@dataclass
class Conversation:
    workspace: Workspace
    client: str = ""  # the address it came from, to cap conversations per client
    last_used: float = field(default_factory=time.monotonic)
    history: list[Message] = field(default_factory=list)  # what the LLM sees of earlier turns
    display: list[dict[str, Any]] = field(default_factory=list)  # the chat as shown
    traces: list[str] = field(default_factory=list)
    requests: int = 0
    cancel: threading.Event | None = None  # set while a request runs
    served: set[Path] = field(default_factory=set)  # the copies the browser fetches (webui.files)
    copies: dict[Path, Path] = field(default_factory=dict)  # workspace file -> its served copy
    ended: bool = False
    left_at: float | None = None  # when its page went away (a reload within the grace comes back)
    pending: Draft | None = None  # a plan waiting for the person to review it (webui.review_form)
    pending_form: dict[str, Any] | None = None  # its form as last sent back, with the problems found
    last_run: Draft | None = None  # the plan of the last run, to edit and run again
    forget_results: Callable[[], object] = lambda: None  # deletes its result cache entries

    def remove(self) -> None:
        """Stop its run and delete its files: the workspace and every copy served to the page."""
        self.ended = True
        if self.cancel is not None:
            self.cancel.set()
        self.delete_files()

    def delete_files(self) -> None:
        self.forget_results()
        shutil.rmtree(self.workspace.root, ignore_errors=True)
        for path in list(self.served):  # each copy sits alone in its own random folder (webui.files)
            shutil.rmtree(path.parent, ignore_errors=True)
        self.served.clear()


class ConversationTable:
    """Conversations by session. A conversation idle for `idle_seconds` ends (its files deleted);
    a flood of new sessions cannot push out an active one: past `limit` conversations, or
    `per_client` from one address, a new session is refused with TableFull instead."""

    def __init__(
        self,
        workdir: Path,
        *,
        limit: int = 500,
        per_client: int = 20,
        idle_seconds: float = 3600.0,
        leave_grace_seconds: float = 120.0,
        welcome: Callable[[], list] = list,
        clock: Callable[[], float] = time.monotonic,
        cache: ResultCache | None = None,
    ):
        self.workdir = workdir
        self.limit = limit
        self.per_client = per_client
        self.idle_seconds = idle_seconds
        self.leave_grace_seconds = leave_grace_seconds
        self.welcome = welcome
        self.clock = clock
        self.cache = cache  # a conversation's entries (scope: its workspace) are deleted with it
        self._by_session: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session: str, client: str) -> Conversation:
        """The session's conversation, made on first use by a caller at address `client` (webui.callers;
        "" when unknown, which counts as one address too); TableFull when there is no room."""
        with self._lock:
            ended = self._end_idle()
            conv = self._by_session.get(session)
            if conv is None:
                self._check_room(client)
                workspace = Workspace.create(self.workdir, uuid.uuid4().hex)
                conv = Conversation(workspace, client=client, display=self.welcome())
                if self.cache is not None:
                    conv.forget_results = partial(self.cache.forget_scope, str(workspace.root))
                self._by_session[session] = conv
            conv.last_used = self.clock()
            conv.left_at = None  # its page is back
            self._by_session.move_to_end(session)
        for old in ended:
            old.remove()
        return conv

    def _end_idle(self) -> list[Conversation]:
        too_old = self.clock() - self.idle_seconds
        idle = [k for k, c in self._by_session.items() if c.cancel is None and c.last_used < too_old]
        return [self._by_session.pop(k) for k in idle]

    def _check_room(self, client: str) -> None:
        if len(self._by_session) >= self.limit:
            raise TableFull(
                "The app is holding as many conversations as it can right now; try again in a few minutes."
            )
        if sum(c.client == client for c in self._by_session.values()) >= self.per_client:
            raise TableFull(
                f"Too many conversations from your address ({self.per_client}); close some tabs "
                "or wait for them to time out."
            )

    def leave(self, session: str) -> None:
        """Its page went away: unless a page comes back to it within the grace, it ends with its
        files (a reload comes back; a closed tab does not)."""
        conv = self.find(session)
        if conv is None:
            return
        conv.left_at = left = self.clock()

        def end_if_still_gone() -> None:
            with self._lock:
                gone = self._by_session.get(session) is conv and conv.left_at == left
                if gone:
                    self._by_session.pop(session)
            if gone:
                conv.remove()

        timer = threading.Timer(self.leave_grace_seconds, end_if_still_gone)
        timer.daemon = True
        timer.start()

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
