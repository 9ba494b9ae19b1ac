"""One call from another program (an MCP tool, the OpenAI-compatible API): stateless, in its own
workspace, deleted when the call ends, under the same limits as the chat.

What the chat's settings panel offers a person, a client sends as headers (never as tool arguments):
X-LLM-Base-URL, X-LLM-Model and X-LLM-API-Key. They pass the chat's own checks (ChatApp.request_settings):
the server's key never goes to a URL a client named, and a public app only talks to public servers.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import shutil
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hugginggpt import tasks as task_types
from hugginggpt.events import Done, Event, PickSource
from hugginggpt.execute import ExecutionSettings, RunContext, execute_steps
from hugginggpt.llm import Message
from hugginggpt.pipeline import Pipeline
from hugginggpt.plan import RESOURCE_REF, Plan, Task
from hugginggpt.records import TaskRecord
from hugginggpt.selection import Choice
from hugginggpt.workspace import Workspace

from .api_files import MAX_FILES, InputRefused, Served, publish, receive
from .chat import ChatApp, LLMChoice

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
    done: Done | None = None  # None for a single task run without the LLM


class Calls:
    def __init__(self, chat: ChatApp):
        self.chat = chat

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
        visitor: str = "",
    ) -> Iterator[Accepted | Event | Finished]:
        """Plan, select, execute and respond: yields Accepted, the pipeline's events, then Finished.
        `visitor`: the caller's address, for the daily token budget of a public app.

        Raises InputRefused (bad files or headers, the day's tokens spent) or slots.Busy before Accepted."""
        if not request.strip():
            raise InputRefused("The request is empty: say what you want done.")
        spent = self.chat.tokens.refusal(visitor)
        if spent:
            raise TokensSpent(spent)
        settings = self._settings(credentials)
        pipeline = Pipeline(
            llm=self.chat.llm_for(settings),
            catalog=self.chat.catalog,
            endpoint=self.chat.backends.endpoint_for(settings.inference, context),
            settings=settings,
            cache=self.chat.backends.cache,
        )
        with self._workspace() as ws:
            received = self._receive(files, ws, settings)
            for ref, path in zip(files, received, strict=True):
                if ref.earlier:
                    ws.add_upload(path)
            new = [p for ref, p in zip(files, received, strict=True) if not ref.earlier]
            with self._slot(cancelled) as held:
                if not held:
                    return  # given up while waiting for a slot: nothing ran
                yield Accepted(ws.root)
                run = pipeline.run(request, workspace=ws, files=new, history=history, cancelled=cancelled)
                run = self.chat.tokens.counted(visitor, run)
                for event in run:
                    if isinstance(event, Done):
                        yield Finished(event.records, publish(event.records, root_url), event)
                    else:
                        yield event

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
    ) -> Iterator[Accepted | Event | Finished]:
        """Run `task` with `model` (one from the catalog) or the catalog's top runnable models, in
        rank order as fallbacks. Media arguments are FileRefs' strings; text arguments plain text."""
        spec = task_types.get(task)
        if spec is None:
            raise InputRefused(f"unknown task type {task!r}")
        settings = self.chat.settings
        endpoint = self.chat.backends.endpoint_for(settings.inference, context)
        choice = self._choice(task, model, endpoint.can_run, settings.top_k)
        with self._workspace() as ws:
            values: dict[str, str] = {}
            for number, arg in enumerate(spec.args, start=1):
                value = str(args.get(arg.name) or "").strip()
                if not value:
                    if arg.required:
                        raise InputRefused(f"{task} needs its '{arg.name}' argument.")
                    continue
                if arg.kind == "text":
                    if RESOURCE_REF.search(value):
                        raise InputRefused(f"'{arg.name}' may not contain '<resource>-N' references.")
                    values[arg.name] = value
                else:
                    (path,) = self._receive([FileRef(value, arg.kind)], ws, settings, first=number)
                    values[arg.name] = ws.add_upload(path).name
            with self._slot(cancelled) as held:
                if not held:
                    return
                yield Accepted(ws.root)
                run_id = "task-" + uuid.uuid4().hex[:8]
                ctx = RunContext(
                    endpoint=endpoint,
                    workspace=ws,
                    run_dir=ws.run_dir(run_id),
                    settings=ExecutionSettings(
                        max_workers=1,
                        task_timeout=settings.task_timeout,
                        task_attempts=settings.task_attempts,
                    ),
                    cancelled=cancelled,
                )
                plan = Plan([Task(0, task, [], values)])
                records = yield from execute_steps(plan, {0: choice}, ctx)
                yield Finished(tuple(records), publish(records, root_url))

    def _choice(self, task: str, model: str | None, runnable: Callable[[Any], bool], k: int) -> Choice:
        catalog = self.chat.catalog
        if model:
            card = catalog.get(model.strip(), task)
            if card is None:
                raise InputRefused(f"'{model}' is not a {task} model in this server's catalog.")
            if not runnable(card):
                raise InputRefused(
                    f"'{model}' cannot run on this server (inference: {self.chat.settings.inference})."
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

    def _settings(self, credentials: Credentials):
        choice = LLMChoice(credentials.base_url, credentials.model, credentials.api_key)
        try:
            return self.chat.request_settings(choice)
        except ValueError as e:  # headers are the client's input, like the settings panel's fields
            raise InputRefused(f"Settings problem (X-LLM-* headers): {e}") from None

    def _receive(self, files: Sequence[FileRef], ws: Workspace, settings, first: int = 1) -> list[Path]:
        if len(files) > MAX_FILES:
            raise InputRefused(f"{len(files)} files were sent; at most {MAX_FILES} are accepted per request.")
        incoming = ws.root / "incoming"
        return [
            receive(
                f.ref,
                incoming,
                settings=settings,
                max_bytes=self.chat.max_upload_bytes,
                hint=f.hint,
                number=n,
            )
            for n, f in enumerate(files, start=first)
        ]

    @contextmanager
    def _workspace(self) -> Iterator[Workspace]:
        """A fresh workspace for one call, deleted when the call ends (its files published first)."""
        ws = Workspace.create(self.chat.workdir, "call-" + uuid.uuid4().hex)
        try:
            yield ws
        finally:
            shutil.rmtree(ws.root, ignore_errors=True)

    @contextmanager
    def _slot(self, cancelled: threading.Event) -> Iterator[bool]:
        """Holds one of the requests-at-once slots; False when the client gave up waiting."""
        held = self.chat.slots.acquire(cancelled)
        try:
            yield held
        finally:
            if held:
                self.chat.slots.release()


T = TypeVar("T")
_END = object()


async def drive(
    work: Callable[[threading.Event], Iterator[T]], *, heartbeat: float | None = None
) -> AsyncIterator[T | None]:
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
