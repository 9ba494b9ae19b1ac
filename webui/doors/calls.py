"""One call from another program (an MCP tool, the OpenAI-compatible API): stateless, in its own
workspace, deleted when the call ends, under the same limits as the chat.

What the chat's settings panel offers a person, a client sends as headers (never as tool arguments):
X-LLM-Base-URL, X-LLM-Model and X-LLM-API-Key. They pass the chat's own checks (Host.request_settings):
the server's key never goes to a URL a client named, and a public app only talks to public servers.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
import shutil
import threading
import uuid
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any, TypeVar

from hugginggpt import tasks as task_types
from hugginggpt.config import Settings
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.interface import Message
from hugginggpt.run.events import Done, Event, PickSource
from hugginggpt.run.pipeline import Pipeline
from hugginggpt.run.records import TaskRecord
from hugginggpt.stages.plan import RESOURCE_REF, Plan, Task
from hugginggpt.stages.selection import Choice
from webui.doors.api_files import MAX_FILES, InputRefused, Served, publish, receive
from webui.host.host import Host
from webui.host.run_entry import Refused
from webui.host.session_settings import LLMChoice

log = logging.getLogger(__name__)

CREDENTIAL_HEADERS = ("x-llm-base-url", "x-llm-model", "x-llm-api-key")


class TokensSpent(InputRefused):
    """The caller has spent the day's LLM tokens (a public app's visitor_daily_tokens)."""


@dataclass(frozen=True)
class Credentials:
    """The controller LLM a client asks for; empty strings mean the server's own."""

    base_url: str = ""
    model: str = ""
    api_key: str = field(default="", repr=False)

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Credentials:
        lower = {k.lower(): v for k, v in headers.items()}
        base_url, model, key = (str(lower.get(h) or "").strip() for h in CREDENTIAL_HEADERS)
        return cls(base_url, model, key)


@dataclass(frozen=True)
class FileRef:
    """A file a client sends: a data URL, base64, or an http(s) URL."""

    ref: str
    hint: str = "file"  # image | audio: names the saved file
    earlier: bool = False  # from an earlier turn: available to the plan, but not "attached to this message"


@dataclass(frozen=True)
class Accepted:
    """The call's inputs were accepted and it holds a slot: from here on it runs."""

    root: Path  # the call's workspace: names of its files are relative to it


@dataclass(frozen=True)
class Finished:
    """The last item of a call: what ran, and the generated files as the client fetches them."""

    records: tuple[TaskRecord, ...]
    served: dict[Path, Served]
    done: Done


class Calls:
    """The calls of the doors for other programs, over the Host every door shares."""

    def __init__(self, host: Host):
        self.host = host

    # ---- the whole pipeline --------------------------------------------------------------------

    def pipeline_call(
        self,
        request: str,
        files: Sequence[FileRef],
        credentials: Credentials,
        *,
        root_url: str,
        cancelled: threading.Event,
        history: Sequence[Message] = (),
        context: contextvars.Context | None = None,
        caller_key: str = "",
        caller: str = "",
    ) -> Iterator[Accepted | Event | Finished]:
        """Plan, select, execute and respond: yields Accepted, the pipeline's events, then Finished.

        Raises InputRefused (bad files or headers, the day's tokens spent) or slots.Busy before Accepted.
        `caller_key`: the caller's own key (an API bearer token), whose calls share result cache
        entries; `caller`: its address (webui.host.callers), whose calls may wait for a slot only so many
        at once, and whose LLM tokens a public app counts against its daily budget."""
        if not request.strip():
            raise InputRefused("The request is empty: say what you want done.")
        pipeline = self._pipeline(lambda: self._settings(credentials), context, caller_key, caller)

        def start(ws: Workspace) -> Iterator[Accepted | Event | Finished]:
            received = self._receive(files, ws, pipeline.settings)  # decoded only under the run's slot
            for ref, path in zip(files, received, strict=True):
                if ref.earlier:
                    ws.add_upload(path)
            new = [p for ref, p in zip(files, received, strict=True) if not ref.earlier]
            run = pipeline.run(request, workspace=ws, files=new, history=history, cancelled=cancelled)
            return chain([Accepted(ws.root)], self._finished(run, root_url))

        with self._workspace() as ws:  # nothing when the client gave up waiting for a slot
            yield from self.host.entry.run(caller, cancelled, lambda: start(ws))

    # ---- one task, no LLM ----------------------------------------------------------------------

    def task_call(
        self,
        task: str,
        args: Mapping[str, str | None],
        *,
        model: str | None,
        root_url: str,
        cancelled: threading.Event,
        context: contextvars.Context | None = None,
        caller_key: str = "",
        caller: str = "",
    ) -> Iterator[Accepted | Event | Finished]:
        """Run `task` with `model` (one from the catalog) or the catalog's top runnable models, in
        rank order as fallbacks. Media arguments are FileRefs' strings; text arguments plain text.

        The task runs as a one-task plan through the pipeline (no LLM call: the plan and the model
        are given, and no answer is written), so it gets the result cache, the output budgets, the
        records and a trace like every other run."""
        spec = task_types.get(task)
        if spec is None:
            raise InputRefused(f"unknown task type {task!r}")
        settings = self.host.settings
        pipeline = self._pipeline(lambda: settings, context, caller_key, caller, asks_llm=False)
        choice = self._choice(task, model, pipeline.endpoint.can_run, settings.top_k)
        text_args = self._text_args(spec, task, args)

        def start(ws: Workspace) -> Iterator[Accepted | Event | Finished]:
            values = dict(text_args)
            for number, arg in enumerate(spec.args, start=1):
                value = str(args.get(arg.name) or "").strip()
                if arg.kind != "text" and value:  # decoded only under the run's slot
                    (path,) = self._receive([FileRef(value, arg.kind)], ws, settings, first=number)
                    values[arg.name] = ws.add_upload(path).name
            plan = Plan([Task(0, task, [], values)])
            run = pipeline.run_plan(
                f"Run {task} once.", plan, {0: choice}, workspace=ws, cancelled=cancelled, answer=False
            )
            return chain([Accepted(ws.root)], self._finished(run, root_url))

        with self._workspace() as ws:
            yield from self.host.entry.run(caller, cancelled, lambda: start(ws))

    @staticmethod
    def _text_args(spec: task_types.TaskSpec, task: str, args: Mapping[str, str | None]) -> dict[str, str]:
        """The task's text arguments; InputRefused for a missing required argument of any kind."""
        values: dict[str, str] = {}
        for arg in spec.args:
            value = str(args.get(arg.name) or "").strip()
            if not value:
                if arg.required:
                    raise InputRefused(f"{task} needs its '{arg.name}' argument.")
                continue
            if arg.kind == "text":
                if RESOURCE_REF.search(value):
                    raise InputRefused(f"'{arg.name}' may not contain '<resource>-N' references.")
                values[arg.name] = value
        return values

    @staticmethod
    def _finished(run: Iterator[Event], root_url: str) -> Iterator[Event | Finished]:
        for event in run:
            if isinstance(event, Done):
                yield Finished(event.records, publish(event.records, root_url), event)
            else:
                yield event

    def _choice(self, task: str, model: str | None, runnable: Callable[[Any], bool], k: int) -> Choice:
        catalog = self.host.catalog
        if model:
            card = catalog.get(model.strip(), task)
            if card is None:
                raise InputRefused(f"'{model}' is not a {task} model in this server's catalog.")
            if not runnable(card):
                raise InputRefused(
                    f"'{model}' cannot run on this server (inference: {self.host.settings.inference})."
                )
            return Choice(0, task, card, "the model the client asked for", (card,), PickSource.ONLY_CANDIDATE)
        ranked = tuple(catalog.candidates(task, k=k, runnable=runnable))
        if not ranked:
            raise InputRefused(f"No model in this server's catalog can run {task} here.")
        # No LLM picks here: the top-ranked model runs, the others are its fallbacks.
        return Choice(
            0, task, ranked[0], "the catalog's top-ranked runnable model", ranked, PickSource.ONLY_CANDIDATE
        )

    # ---- shared parts --------------------------------------------------------------------------

    def _pipeline(
        self,
        settings: Callable[[], Settings],
        context: contextvars.Context | None,
        caller_key: str,
        caller: str,
        *,
        asks_llm: bool = True,
    ) -> Pipeline:
        """A pipeline for one call, admitted by the run entry (TokensSpent, InputRefused). Its result
        cache entries are the caller's (by its key); an anonymous call's results are not kept, as
        nobody could be served them again (unless the cache is shared by everyone: cache_scope "process")."""
        how: dict[str, Any] = {"cached": False}
        if self.host.settings.cache_scope == "process":
            how = {"cache_scope": "process"}
        elif caller_key:
            how = {"cache_scope": "caller:" + hashlib.sha256(caller_key.encode()).hexdigest()}
        try:
            return self.host.entry.admit(caller, settings, asks_llm=asks_llm, context=context, **how)
        except Refused as e:
            raise TokensSpent(str(e)) if e.spent else InputRefused(str(e)) from None

    def _settings(self, credentials: Credentials) -> Settings:
        choice = LLMChoice(credentials.base_url, credentials.model, credentials.api_key)
        try:
            return self.host.request_settings(choice)
        except ValueError as e:  # headers are the client's input, like the settings panel's fields
            raise Refused(f"Settings problem (X-LLM-* headers): {e}") from None

    def _receive(
        self, files: Sequence[FileRef], ws: Workspace, settings: Settings, first: int = 1
    ) -> list[Path]:
        if len(files) > MAX_FILES:
            raise InputRefused(f"{len(files)} files were sent; at most {MAX_FILES} are accepted per request.")
        incoming = ws.root / "incoming"
        return [
            receive(
                f.ref,
                incoming,
                settings=settings,
                max_bytes=self.host.max_upload_bytes,
                hint=f.hint,
                number=n,
            )
            for n, f in enumerate(files, start=first)
        ]

    @contextmanager
    def _workspace(self) -> Iterator[Workspace]:
        """A fresh workspace for one call, deleted when the call ends (its files published first)."""
        ws = Workspace.create(self.host.workdir, "call-" + uuid.uuid4().hex)
        try:
            yield ws
        finally:
            shutil.rmtree(ws.root, ignore_errors=True)


T = TypeVar("T")
_END = object()


async def drive(
    work: Callable[[threading.Event], Iterator[T]], *, heartbeat: float | None = None
) -> AsyncGenerator[T | None, None]:
    """Run a blocking generator in its own thread; yield its items here as they come, and None
    after each `heartbeat` seconds without one (a streamed reply keeps its connection alive).

    Its own thread, not the event loop's pool: a waiting call must not hold one of the threads
    Gradio serves the page with. When the consumer stops early (the client hung up), the cancel
    event the generator was given is set, and it winds down in its thread."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue = asyncio.Queue()
    cancelled = threading.Event()

    def put(item: Any) -> None:
        try:
            loop.call_soon_threadsafe(inbox.put_nowait, item)
        except RuntimeError:  # the loop is gone (server shutting down): nobody is listening
            cancelled.set()

    def run() -> None:
        try:
            for item in work(cancelled):
                put(("item", item))
        except BaseException as e:  # handed to the consumer, who reports it
            put(("error", e))
        finally:
            put(_END)

    threading.Thread(target=run, name="hugginggpt-call", daemon=True).start()
    try:
        while True:
            try:
                message = await asyncio.wait_for(inbox.get(), heartbeat)
            except TimeoutError:
                yield None
                continue
            if message is _END:
                return
            tag, value = message
            if tag == "error":
                raise value
            yield value
    finally:
        cancelled.set()
