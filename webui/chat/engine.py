"""The chat logic behind the Gradio app: one request at a time per conversation, streamed.

Nothing here is module-level state. The conversations are the engine's own (webui.chat.conversations);
the shared parts (catalog, model backends, LLM clients, slots, the run entry) are the Host's
(webui.host.host), which the API doors share. The API key a person types lives only in the request
that carries it and in the LLM client built for it.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings
from hugginggpt.files.artifacts import MEDIA_KINDS
from hugginggpt.observability import metrics
from hugginggpt.run.events import Done, ErrorKind, Event, Outcome
from hugginggpt.run.pipeline import Pipeline
from hugginggpt.run.records import TaskStatus
from hugginggpt.stages.planfile import choices_as_ran
from webui.chat.conversation_store import ConversationStore, browser_key, max_bytes, retention_hours
from webui.chat.conversations import Conversation, ConversationTable, TableFull
from webui.chat.live_runs import LiveRun, Update
from webui.chat.render import RunView, user_messages
from webui.chat.review_form import Draft, Origin, draft_from_json
from webui.chat.turns import history_before, open_turn
from webui.host.backends import Backends
from webui.host.host import CONFIGURE_HINT, Host
from webui.host.limit_words import for_page
from webui.host.run_entry import Refused
from webui.host.session_settings import LLMChoice
from webui.host.slots import RunSlots
from webui.host.uploads import check_upload

DISK_FULL = (
    "This app's disk for conversations is full right now, so the files were not kept. "
    "Delete an earlier conversation of yours, or try again later."
)

log = logging.getLogger(__name__)

BUSY = "A request is still running in this conversation: wait for it, or press Stop."
UPLOAD_REFUSED = "Nothing was run. Send the request again with an image or audio file that opens."
REVIEW_HINT = (
    "Nothing has run yet. **Review the plan** below the chat: change an argument, a model, a "
    "dependency or a seed, or delete a task; then press **Run plan**, or **Cancel**."
)

PER_CLIENT = 20  # conversations one address may hold on a public app

__all__ = ["BUSY", "CONFIGURE_HINT", "ChatApp", "Conversation", "LLMChoice"]


class ChatApp:
    """The chat engine over a Host: its conversations, one request at a time each, streamed. Given
    Settings (and the Host's keyword arguments) instead of a Host, it makes its own."""

    def __init__(self, host: Host | Settings, *, max_conversations: int = 500, **services: Any):
        self.host = host if isinstance(host, Host) else Host(host, **services)
        self.conversations = _conversation_table(self.host, max_conversations)
        self.conversations.sweep()
        metrics.watch(conversations_open=lambda: len(self.conversations))

    # The host's parts the chat uses most, read through it (the host alone holds them).

    @property
    def settings(self) -> Settings:
        return self.host.settings

    @property
    def catalog(self) -> Catalog:
        return self.host.catalog

    @property
    def backends(self) -> Backends:
        return self.host.backends

    @property
    def slots(self) -> RunSlots:
        return self.host.slots

    @property
    def max_upload_bytes(self) -> int:
        return self.host.max_upload_bytes

    @property
    def public_llm_only(self) -> bool:
        return self.host.public_llm_only

    def conversation(self, session: str, client: str) -> Conversation:
        """The session's conversation, made now if it has none, for `client`: under the caps for
        every way in (TableFull when there is no room). Only a first message, or a first plan to
        review, comes here; looking at a conversation (`find`) never makes one."""
        return self.conversations.get(session, client)

    def find(self, session: str) -> Conversation | None:
        """The session's conversation if it has one; looking never makes one (a page load makes none)."""
        return self.conversations.find(session)

    def reset(self, session: str) -> bool:
        """A new conversation for this session: fresh workspace and history. Returns whether the old
        one can still be brought back (ConversationTable.undelete)."""
        return self.conversations.drop(session)

    def drop(self, session: str) -> None:
        """Forget a conversation and delete its files."""
        self.conversations.drop(session)

    def stop(self, session: str) -> bool:
        conv = self.conversations.find(session)
        if conv is None or conv.cancel is None:
            return False
        conv.cancel.set()
        return True

    def request_settings(self, choice: LLMChoice, *, resolve: bool = True) -> Settings:
        return self.host.request_settings(choice, resolve=resolve)

    # ---- one request --------------------------------------------------------------------------

    def respond(
        self,
        session: str,
        message: dict[str, Any] | str | None,
        choice: LLMChoice,
        *,
        client: str = "",
        hf_token: str | None = None,
        review: bool = False,
        replace: int | None = None,
    ) -> Iterator[Update]:
        """Yields (chat messages, trace files, still running) as the request advances. With `review`
        the request is planned and its models chosen, then waits as `conv.pending` for the person.
        With `replace` (a turn's index) the request does that turn again in place (webui.chat.turns)."""
        if self.find(session) is None:  # a message that runs nothing takes no conversation place
            refusal = self._first_message_refusal(*_split_message(message), client)
            if refusal is not None:
                yield ([_note(refusal)] if refusal else []), [], False
                return
        try:
            conv = self.conversation(session, client)
        except TableFull as e:
            yield [_note(str(e))], [], False
            return
        try:
            yield from self._respond(conv, session, message, choice, client, hf_token, review, replace)
        finally:
            if conv.run is None:  # a run that goes on saves the conversation when it ends
                self.conversations.save(conv)

    def _respond(
        self,
        conv: Conversation,
        session: str,
        message: dict[str, Any] | str | None,
        choice: LLMChoice,
        client: str,
        hf_token: str | None,
        review: bool,
        replace: int | None = None,
    ) -> Iterator[Update]:
        """The request's updates: said at once when it is refused, else its run's (`stream_run`).
        No generator of its own: the answer path's events pass through no frame that only passes
        them on (tests/test_answer_path.py)."""
        text, files = _split_message(message)
        if conv.cancel is not None:
            return iter([(conv.display + [_note(BUSY)], conv.traces, True)])
        if not text and not files:
            return iter([(conv.display, conv.traces, False)])
        conv.requests += 1
        conv.title = conv.title or self._title(text)
        full = bool(text and files) and not self.conversations.make_room(conv, files)
        if text and not full:  # kept with the conversation, which shows them from there
            files = [str(conv.workspace.add_upload(Path(f))) for f in files]
        user = user_messages(text, files)
        why = "your edit" if replace is not None else ""
        history = history_before(conv.history, conv.turns, replace)
        refusal = ""
        if full:
            user, refusal = user_messages(text, []), DISK_FULL
        elif not text:  # not kept: only a run checks (decodes) what is uploaded
            user = user_messages("(files only)", [])
            refusal = "What should I do with this file? Send it again with a request."
        else:
            try:
                pipeline = self.pipeline_for(choice, client, hf_token)
            except Refused as e:
                refusal = str(e)
        if refusal:  # answered at once: the request and why nothing runs
            open_turn(conv, user, text, replace=replace, why=why)
            conv.display += [_note(refusal)]
            return iter([(conv.display, conv.traces, False)])
        paths = [Path(f) for f in files]
        run = pipeline.plan_only if review else pipeline.run

        def start(cancel: threading.Event) -> Iterator[Event]:
            """Called by the run entry under the run's slot: the uploads are decoded there first, as
            a door's are (webui.doors.calls), so no more files are decoded at once than requests run."""
            checked = [(f, check_upload(f, max_bytes=self.max_upload_bytes)) for f in paths]
            problems = [p for f, p in checked if p]
            if problems:  # a refused file is no upload of the conversation: later plans may not use it
                for f, p in checked:
                    if p:
                        f.unlink(missing_ok=True)
                said = "\n\n".join(problems) + f"\n\n{UPLOAD_REFUSED}"
                return iter([Done(Outcome.FAILED, error=said, error_kind=ErrorKind.INPUT)])
            return run(text, workspace=conv.workspace, files=paths, history=history, cancelled=cancel)

        return self.stream_run(conv, session, text, user, start, replace=replace, why=why)

    def _first_message_refusal(self, text: str, files: list[str], caller: str) -> str | None:
        """Why a session's first message makes no conversation: "" when it is empty (nothing is
        said), the budget's refusal for a request; None: it may be admitted."""
        if not text.strip():
            return None if files else ""
        return self.host.tokens.refusal(caller)

    def _off_hub(self, model: str) -> bool:
        card = self.catalog.get(model)
        return card is not None and card.path is not None

    def _title(self, text: str) -> str:
        """On a private app, the first request's words; on a public one the server keeps no words
        of it outside the conversation itself, so a neutral title (ConversationTable.title)."""
        if self.public_llm_only or not text:
            return ""
        text = " ".join(text.split())
        return text if len(text) <= 60 else text[:59] + "…"

    def pipeline_for(self, choice: LLMChoice, caller: str, hf_token: str | None = None) -> Pipeline:
        """A pipeline with this session's settings for `caller`'s run, admitted by the run entry
        (webui.host.run_entry): Refused when its tokens are spent or the settings are wrong."""
        return self.host.entry.admit(
            caller,
            lambda: self.request_settings(choice),
            context=contextvars.copy_context(),
            hf_token=hf_token,
        )

    def stream_run(
        self,
        conv: Conversation,
        session: str,
        text: str,
        user: list[dict[str, Any]],
        start: Callable[[threading.Event], Iterator[Event]],
        *,
        replace: int | None = None,
        why: str = "",
    ) -> Iterator[Update]:
        """Runs `start(cancel)` (a Pipeline method's events) in a thread and yields the chat as it
        advances: `user` (the person's bubble), then the run's boxes, media and answer. With
        `replace` (a turn's index) the run does that turn again in place, `why` says why
        (webui.chat.turns); `start` must then be given the history before that turn. The run is the
        conversation's (webui.chat.live_runs): a browser's goes on when this stream is closed (a reload,
        a closed tab), and its pages can follow it again (`live`)."""
        cancel = threading.Event()
        if not self.conversations.claim(conv, cancel):  # one request at a time, also for API clients
            return iter([(conv.display + [_note(BUSY)], conv.traces, True)])
        conv.pending = conv.pending_form = None  # a new run replaces a plan under review
        open_turn(conv, user, text, replace=replace, why=why)
        self.conversations.save(conv)  # the request is kept, even if the app ends before its answer
        view = RunView(f"r{conv.requests}", off_hub=self._off_hub)
        run = LiveRun(
            view,
            cancel,
            before=lambda: conv.display,
            traces=lambda: conv.traces,
            finish=lambda: self._end_run(conv, text, run),
        )
        conv.run = run
        name = f"hugginggpt-{session[:8]}"
        drive = partial(run.drive, self.host.entry, conv.client, start, then=partial(_delete_if_left, conv))
        threading.Thread(target=drive, name=name, daemon=True).start()
        threading.Thread(target=run.end_after_grace, name=name, daemon=True).start()
        return run.follow(ends_with_stream=not conv.key)  # a browser's goes on when this stream is closed

    def live(self, session: str) -> LiveRun | None:
        """The run going on in the session's conversation (started by a page since reloaded or
        closed, or in another tab), for a page to follow; None when none is."""
        conv = self.conversations.find(session)
        return conv.run if conv is not None else None

    def _end_run(self, conv: Conversation, text: str, run: LiveRun) -> None:
        """The run has ended (LiveRun calls this once): into the conversation, and saved."""
        run.cancel.set()  # nothing more runs for it
        try:
            self._finish(conv, text, run.view)
        finally:  # the conversation takes requests again, whatever happened
            conv.cancel = conv.run = None
            self.conversations.save(conv)

    def _finish(self, conv: Conversation, text: str, view: RunView) -> None:
        done = view.done
        assert done is not None
        if done.incomplete:
            view.note(f"*The answer above is incomplete: {done.incomplete}.*")
        if done.outcome is Outcome.PLANNED:
            view.note(REVIEW_HINT)
        if done.outcome is Outcome.CANCELLED:
            view.note("Stopped." + (" The partial answer above was kept." if done.answer else ""))
        elif done.error:
            hint = f"\n\n{CONFIGURE_HINT}" if done.error_kind is ErrorKind.LLM else ""
            view.note(f"**Error:** {for_page(done.error)}{hint}")  # limits named as Settings does
        if done.trace_file:
            conv.traces = [*conv.traces, str(done.trace_file)]
        conv.display += view.messages
        request_id = done.request_id or None
        if done.outcome is Outcome.PLANNED and done.plan is not None:
            conv.pending = Draft(text, done.plan, dict(done.choices), Origin.PLANNED, request_id)
            conv.pending_form = None
            return  # the request is answered when its plan runs
        if done.plan is not None and done.plan.tasks:  # its plan can be edited and run again
            ran = choices_as_ran(done.choices, done.records, self.catalog)
            conv.last_run = Draft(text, done.plan, ran, Origin.RAN, request_id, _made_media(done))
        conv.history += [{"role": "user", "content": text}]
        conv.history += [{"role": "assistant", "content": done.answer or f"(no answer: {done.error})"}]


def _conversation_table(host: Host, limit: int) -> ConversationTable:
    """The engine's conversations, kept under the host's work folder; a cap per address matters
    where strangers come (on a private app everyone is one person)."""
    settings = host.settings
    return ConversationTable(
        host.workdir,
        limit=limit,
        per_client=PER_CLIENT if host.public_llm_only else limit,
        leave_grace_seconds=settings.app_leave_grace_seconds,
        cache=host.cache,
        store=ConversationStore(
            host.workdir / "conversations",
            retention_seconds=retention_hours(settings) * 3600,
            max_bytes=max_bytes(settings),
        ),
        saved=browser_key,  # a browser's conversations; an API client's end with its session
        read_draft=lambda raw: draft_from_json(raw, host.catalog),
    )


def _delete_if_left(conv: Conversation) -> None:
    """The page was left mid-run: what the run wrote since goes too."""
    if conv.ended:
        conv.delete_files()


def _made_media(done: Done) -> frozenset[int]:
    """The tasks of a run that drew an image, a clip or a video from a seed: a new seed redraws them."""
    return frozenset(
        r.id
        for r in done.records
        if r.status is TaskStatus.DONE
        and (choice := done.choices.get(r.id)) is not None
        and choice.seed is not None
        and any(a.kind in MEDIA_KINDS for a in r.outputs)
    )


def _split_message(message: dict[str, Any] | str | None) -> tuple[str, list[str]]:
    if message is None:
        return "", []
    if isinstance(message, str):
        return message.strip(), []
    files = []
    for f in message.get("files") or []:
        path = f.get("path") if isinstance(f, dict) else f
        if path:
            files.append(str(path))
    return str(message.get("text") or "").strip(), files


def _note(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}
