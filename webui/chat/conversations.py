"""The conversations of the app's visitors: those of a browser by the key it keeps, those of an API
client by Gradio's session hash.

Each has its own workspace and history, and runs one request at a time. A browser's conversations
are saved on the server's disk (webui.chat.conversation_store) after every request: they outlast a
closed tab and a restart, and only deleting them or the retention time removes them. An API
client's conversation lives in memory and ends with its session (a random folder name: the session
hash is known to the client, the folder is not).
"""

from __future__ import annotations

import contextlib
import logging
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

from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.interface import Message
from hugginggpt.run.cache import ResultCache
from hugginggpt.run.journal import JournalState
from webui.chat import interrupted
from webui.chat.conversation_store import ConversationStore, caller_id
from webui.chat.live_runs import LiveRun
from webui.chat.record_paths import absolute as _absolute
from webui.chat.record_paths import map_paths as _map_paths
from webui.chat.record_paths import relative as _relative
from webui.chat.review_form import Draft, draft_to_json
from webui.chat.turns import Turn

log = logging.getLogger(__name__)
SWEEP_SECONDS = 600.0  # how often expired conversations are looked for
INTERRUPTED = interrupted.RESUMABLE
FOLDER_KEY = "folder:"  # a conversation taken up with no page open is saved under its folder's id


class TableFull(RuntimeError):
    """No room for another conversation now; the message says so in the visitor's words."""


@dataclass
class Conversation:
    workspace: Workspace
    key: str = ""  # a browser's key: saved on disk under it (webui.chat.conversation_store); else ""
    title: str = ""
    created: float = field(default_factory=time.time)
    client: str = ""  # the address it came from, to cap conversations per client
    last_used: float = field(default_factory=time.monotonic)
    history: list[Message] = field(default_factory=list)  # what the LLM sees of earlier turns
    display: list[dict[str, Any]] = field(default_factory=list)  # the chat as shown
    traces: list[str] = field(default_factory=list)
    requests: int = 0
    cancel: threading.Event | None = None  # set while a request runs
    run: LiveRun | None = None  # the request running, which its pages follow (webui.chat.live_runs)
    served: set[Path] = field(default_factory=set)  # the copies the browser fetches (webui.chat.files)
    copies: dict[Path, Path] = field(default_factory=dict)  # workspace file -> its served copy
    ended: bool = False
    left_at: float | None = None  # when its page went away (a reload within the grace comes back)
    pending: Draft | None = None  # a plan waiting for the person to review it (webui.chat.review_form)
    pending_form: dict[str, Any] | None = None  # its form as last sent back, with the problems found
    last_run: Draft | None = None  # the plan of the last run, to edit and run again
    turns: list[Turn] = field(default_factory=list)  # where each request begins (webui.chat.turns)
    forget_results: Callable[[], object] = lambda: None  # deletes its result cache entries
    resumable: JournalState | None = None  # the run a restart cut off, to continue (webui.chat.resume_runs)

    def remove(self) -> None:
        """Stop its run and delete its files: the workspace and every copy served to the page."""
        self.ended = True
        if self.cancel is not None:
            self.cancel.set()
        self.delete_files()

    def delete_files(self) -> None:
        self.forget_results()
        shutil.rmtree(self.workspace.root, ignore_errors=True)
        self.delete_copies()

    def delete_copies(self) -> None:
        """Removes every copy served to the page: their URLs answer 404 from now on."""
        for path in list(self.served):  # each copy sits alone in its own random folder (webui.chat.files)
            shutil.rmtree(path.parent, ignore_errors=True)
        self.served.clear()
        self.copies.clear()

    @property
    def saved_worth(self) -> bool:
        """Whether there is anything to keep: a request was made in it."""
        return bool(self.key) and self.requests > 0

    def record(self) -> dict[str, Any]:
        """What is saved of it: the chat and history, paths inside the workspace made relative."""
        here = self.workspace.root
        return {
            "title": self.title,
            "caller": caller_id(self.client),  # whose it is, for the disk cap's shares
            "created": self.created,
            "requests": self.requests,
            "history": self.history,
            "display": _map_paths(self.display, lambda p: _relative(p, here)),
            "traces": [_relative(t, here) for t in self.traces],
            "copies": [[_relative(s, here), str(c)] for s, c in self.copies.items()],
            "turns": [t.to_json() for t in self.turns],
            "running": self.cancel is not None,  # saved mid-run: a restart cut the request off
            # The plans, so that after a restart the last one can still be edited and a pending one run.
            "last_run": draft_to_json(self.last_run) if self.last_run else None,
            "pending": draft_to_json(self.pending) if self.pending else None,
        }

    @classmethod
    def from_record(
        cls,
        workspace: Workspace,
        key: str,
        record: dict[str, Any],
        read_draft: Callable[[Any], Draft | None] = lambda raw: None,
    ) -> Conversation:
        """`read_draft` reads a saved plan back (webui.chat.review_form.draft_from_json, with the catalog)."""
        here = workspace.root
        conv = cls(workspace, key=key, title=str(record.get("title") or ""))
        conv.created = float(record.get("created") or time.time())
        conv.requests = int(record.get("requests") or 0)
        conv.history = list(record.get("history") or [])
        conv.display = _map_paths(list(record.get("display") or []), lambda p: _absolute(p, here))
        conv.traces = [_absolute(t, here) for t in record.get("traces") or []]
        for source, copy in record.get("copies") or []:
            conv.copies[Path(_absolute(source, here))] = Path(copy)
            conv.served.add(Path(copy))
        conv.turns = [t for raw in record.get("turns") or [] if (t := Turn.from_json(raw)) is not None]
        conv.last_run, conv.pending = read_draft(record.get("last_run")), read_draft(record.get("pending"))
        if record.get("running") is True:  # the app stopped while its last request ran
            conv.resumable = interrupted.cut_off_run(workspace)
            conv.display.append({"role": "assistant", "content": interrupted.note_for(conv.resumable)})
        return conv


class ConversationTable:
    """Conversations by session. A conversation idle for `idle_seconds` leaves memory (a saved one
    stays on disk; any other ends, its files deleted); a flood of new sessions cannot push out an
    active one: past `limit` conversations, or `per_client` from one address, a new session is
    refused with TableFull instead. With a `store`, conversations whose key `saved(key)` holds
    true are saved there and found there again."""

    def __init__(
        self,
        workdir: Path,
        *,
        limit: int = 500,
        per_client: int = 20,
        idle_seconds: float = 3600.0,
        leave_grace_seconds: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
        cache: ResultCache | None = None,
        store: ConversationStore | None = None,
        saved: Callable[[str], bool] = lambda key: False,
        read_draft: Callable[[Any], Draft | None] = lambda raw: None,
    ):
        self.workdir = workdir
        self.limit = limit
        self.per_client = per_client
        self.idle_seconds = idle_seconds
        self.leave_grace_seconds = leave_grace_seconds
        self.clock = clock
        self.cache = cache  # a conversation's entries (scope: its workspace) are deleted with it
        self.store = store
        self.saved = saved if store is not None else lambda key: False
        self.read_draft = read_draft  # a saved plan, read back (webui.chat.review_form.draft_from_json)
        self._by_session: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()
        self._store_lock = threading.Lock()  # one save or delete at a time
        self._swept = clock()
        self._adopted: dict[str, Conversation] = {}  # by folder id: taken up with no page open

    def get(self, session: str, client: str) -> Conversation:
        """The session's conversation, made on first use by a caller at address `client` (webui.host.callers;
        "" when unknown, which counts as one address too); TableFull when there is no room."""
        with self._lock:
            ended = self._end_idle()
            conv = self._by_session.get(session) or self._load(session)
            if conv is None:
                self._check_room(client)
                conv = self._new(session, client)
            conv.client = conv.client or client
            self._by_session[session] = conv
            conv.last_used = self.clock()
            conv.left_at = None  # its page is back
            self._by_session.move_to_end(session)
        for old in ended:
            old.remove()
        if self.clock() - self._swept > SWEEP_SECONDS:  # retention applies while the app runs, too
            self._swept = self.clock()
            self.sweep()
        return conv

    def _new(self, session: str, client: str) -> Conversation:
        if self.store is not None and self.saved(session):
            workspace = Workspace(self.store.workspace_root(session))
            conv = Conversation(workspace, key=session, client=client)
        else:
            workspace = Workspace.create(self.workdir, uuid.uuid4().hex)
            conv = Conversation(workspace, client=client)
        return self._with_cache(conv)

    def _with_cache(self, conv: Conversation) -> Conversation:
        """Its result cache entries (scope: its workspace) are deleted with it."""
        if self.cache is not None:
            conv.forget_results = partial(self.cache.forget_scope, str(conv.workspace.root))
        return conv

    def _load(self, session: str) -> Conversation | None:
        """A saved conversation, from disk (called with the lock held)."""
        if self.store is None or not self.saved(session):
            return None
        adopted = self._adopted.pop(self.store.folder_id(session), None)
        if adopted is not None:  # taken up on start (webui.chat.resume_runs): its page is back
            adopted.key = session
            return adopted
        record = self.store.load(session)
        if record is None:
            return None
        workspace = Workspace(self.store.workspace_root(session))
        return self._with_cache(Conversation.from_record(workspace, session, record, self.read_draft))

    def adopt(self, folder_id: str, record: dict[str, Any]) -> Conversation:
        """A saved conversation taken up while no page has it open (a run resumed on start): it is
        saved under its folder, and the page that opens it next finds it here, run and all."""
        assert self.store is not None
        key = FOLDER_KEY + folder_id
        workspace = Workspace(self.store.workspace_root(key))
        conv = self._with_cache(Conversation.from_record(workspace, key, record, self.read_draft))
        with self._lock:
            self._adopted[folder_id] = conv
        return conv

    def save(self, conv: Conversation) -> None:
        """Writes a browser's conversation to disk (if anything happened in it and it still exists)."""
        if self.store is None or not conv.saved_worth or conv.ended:
            return
        with self._store_lock:
            try:
                self.store.save(conv.key, conv.record())
            except OSError as e:  # a full or read-only disk: the chat goes on, kept in memory only
                log.warning("conversation not saved: %s", e)
            self.make_room(conv, [], locked=True)  # over the cap, the oldest go at once, not at a sweep

    def make_room(self, conv: Conversation, files: list[str], *, locked: bool = False) -> bool:
        """Trims the disk cap's conversations for `files` to join `conv` (its caller's own first:
        webui.chat.conversation_store); False when they would still pass it (then: engine.DISK_FULL)."""
        if self.store is None or not self.saved(conv.key):
            return True
        incoming = sum(Path(f).stat().st_size for f in files if Path(f).is_file())
        with contextlib.nullcontext() if locked else self._store_lock:
            keep, caller = self._open_keys(), caller_id(conv.client)
            self.store.trim(gone=self._forget_results, keep=keep, caller=caller, need=incoming)
            return not self.store.would_pass(incoming)

    def _end_idle(self) -> list[Conversation]:
        """Takes idle conversations out of memory; returns those that end with it (not saved)."""
        too_old = self.clock() - self.idle_seconds
        idle = [k for k, c in self._by_session.items() if c.cancel is None and c.last_used < too_old]
        gone = [self._by_session.pop(k) for k in idle]
        return [c for c in gone if not c.key]

    def _check_room(self, client: str) -> None:
        if len(self._by_session) >= self.limit:
            self._end_one_unused()
        if len(self._by_session) >= self.limit:
            raise TableFull(
                "The app is holding as many conversations as it can right now; try again in a few minutes."
            )
        if sum(c.client == client for c in self._by_session.values()) >= self.per_client:
            raise TableFull(
                f"Too many conversations from your address ({self.per_client}); close some tabs "
                "or wait for them to time out."
            )

    def _end_one_unused(self) -> None:
        """A full table's oldest conversation that never ran, waits on no plan and was unused for
        the leave grace goes first: it holds nothing, yet would hold its place for the idle hour."""
        since = self.clock() - self.leave_grace_seconds
        for key, conv in self._by_session.items():  # oldest first
            if conv.requests == 0 and conv.cancel is None and conv.pending is None and conv.last_used < since:
                del self._by_session[key]
                return None if conv.key else conv.remove()  # a saved one stays on disk

    def leave(self, session: str) -> None:
        """Its page went away: unless a page comes back to it within the grace, it leaves memory
        (not while a request runs in it: then once that has ended). A saved conversation stays on
        disk (nothing is deleted for a closed tab); any other ends with its files."""
        with self._lock:
            conv = self._by_session.get(session)
        if conv is None:
            return
        conv.left_at = left = self.clock()

        def end_if_still_gone() -> None:
            with self._lock:
                away = self._by_session.get(session) is conv and conv.left_at == left
                running = away and conv.cancel is not None
                if away and not running:
                    self._by_session.pop(session)
            if running:  # its run goes on without a page, in memory, and saves it when it ends
                wait()
            elif away and not conv.key:
                conv.remove()

        def wait() -> None:
            timer = threading.Timer(self.leave_grace_seconds, end_if_still_gone)
            timer.daemon = True
            timer.start()

        wait()

    def find(self, session: str) -> Conversation | None:
        """The conversation, from memory or (a saved one) from disk; None when there is none."""
        with self._lock:
            conv = self._by_session.get(session)
            if conv is None and (conv := self._load(session)) is not None:
                conv.last_used = self.clock()
                self._by_session[session] = conv
            return conv

    def title(self, session: str) -> str | None:
        """The conversation's title (None when it does not exist); a neutral one if it has none."""
        conv = self.find(session)
        if conv is None:
            return None
        return conv.title or time.strftime("Conversation of %b %d, %H:%M", time.localtime(conv.created))

    def drop(self, session: str) -> bool:
        """Deletes a conversation: stops its run; its files are unreachable at once. A saved one
        can be brought back for a while with `undelete`; returns whether it can."""
        conv = self.find(session)
        with self._lock:
            self._by_session.pop(session, None)
        if conv is None:
            return False
        if not conv.key or self.store is None:
            conv.remove()
            return False
        conv.ended = True
        if conv.cancel is not None:
            conv.cancel.set()
        conv.forget_results()  # its cached results go at once; an undo brings back its files only
        conv.delete_copies()
        with self._store_lock:
            return self.store.delete(conv.key)

    def undelete(self, session: str) -> Conversation | None:
        """A conversation deleted a moment ago, back; None when it is gone for good."""
        if self.store is None or not self.saved(session):
            return None
        with self._store_lock:
            if not self.store.undelete(session):
                return None
        return self.find(session)

    def sweep(self) -> None:
        """Removes saved conversations past their retention, deleted ones past their undo, and the
        oldest beyond the disk cap."""
        if self.store is not None:
            with self._store_lock:
                self.store.sweep(gone=self._forget_results, keep=self._open_keys())

    def _open_keys(self) -> set[str]:
        """The conversations the cap never removes: those in memory (a page shows them, or left it
        within the grace; a run may be writing their files). They leave memory within
        idle_seconds, and the next sweep may then remove them. Called with the store's lock held."""
        with self._lock:
            return {c.key for c in self._by_session.values() if c.key}

    def _forget_results(self, root: Path) -> None:
        """The result cache entries of a conversation removed for good (scope: its workspace)."""
        if self.cache is not None:
            self.cache.forget_scope(str(root))

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
