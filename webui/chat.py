"""The chat logic behind the Gradio app: conversations per browser session, one request at a time.

Nothing here is module-level state: a ChatApp holds the shared, read-only parts (catalog, model
runtimes) and a table of conversations keyed by Gradio's session hash. The API key a person types
lives only in the request that carries it and in the LLM client built for that request.
"""

from __future__ import annotations

import contextvars
import logging
import os
import queue
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hugginggpt import urlguard
from hugginggpt.catalog import Catalog
from hugginggpt.config import INFERENCE_MODES, Settings
from hugginggpt.endpoints import Endpoint, HostedEndpoint, LocalEndpoint, RoutedEndpoint
from hugginggpt.events import Done, ErrorKind, Outcome
from hugginggpt.factory import DEFAULT_SERVER_MODEL, build_catalog, build_llm
from hugginggpt.llm import LLM, OPENAI_BASE_URL, LocalChatLLM, Message, without_credentials
from hugginggpt.pipeline import Pipeline
from hugginggpt.workspace import Workspace

from .gpu import on_gpu
from .render import RunView
from .slots import RunSlots
from .uploads import check_upload

log = logging.getLogger(__name__)

DEFAULT_MAX_UPLOAD_BYTES = 20_000_000
ENDED_EARLY = "Internal error: the request ended early."
BUSY = "A request is still running in this conversation: wait for it, or press Stop."
STOP_GRACE_SECONDS = 2.0  # after Stop, how long the run may take to wind down before the chat moves on

CONFIGURE_HINT = (
    "To fix this, open **Settings** below the chat and set the **LLM base URL** of an OpenAI-compatible "
    "server (for example `https://api.openai.com/v1`, `https://router.huggingface.co/v1` for Hugging Face "
    "Inference Providers, or `http://localhost:11434/v1` for a local Ollama), the **LLM model** it serves, "
    "and an **API key** if it needs one. Whoever runs the app can set them for everyone with the environment "
    "variables `HUGGINGGPT_LLM_BASE_URL`, `HUGGINGGPT_LLM_MODEL` and `OPENAI_API_KEY`."
)


@dataclass
class Conversation:
    workspace: Workspace
    history: list[Message] = field(default_factory=list)  # what the LLM sees of earlier turns
    display: list[dict[str, Any]] = field(default_factory=list)  # the chat as shown
    traces: list[str] = field(default_factory=list)
    requests: int = 0
    cancel: threading.Event | None = None  # set while a request runs


@dataclass(frozen=True)
class LLMChoice:
    """What a person typed in the settings panel (empty strings mean: the server's default)."""

    base_url: str = ""
    model: str = ""
    api_key: str = field(default="", repr=False)
    inference: str = ""
    top_k: int | float | None = None


class ChatApp:
    def __init__(
        self,
        settings: Settings,
        *,
        catalog: Catalog | None = None,
        endpoint: Endpoint | None = None,
        llm: LLM | None = None,
        max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
        public_llm_only: bool | None = None,
        max_conversations: int = 500,
        concurrency: int = 8,
    ):
        self.settings = settings
        self.catalog = catalog if catalog is not None else build_catalog(settings)
        self.endpoint = endpoint  # injected: used for every inference mode
        self.llm = llm  # injected: shared by every session (its call log is too)
        self.max_upload_bytes = max_upload_bytes
        # On a public Space a typed base URL must not reach the host's private network.
        self.public_llm_only = (
            bool(os.environ.get("SPACE_ID")) if public_llm_only is None else public_llm_only
        )
        self.workdir = Path(settings.workdir).resolve()
        self.max_conversations = max_conversations
        self._conversations: OrderedDict[str, Conversation] = OrderedDict()
        self._backends: dict[str, Endpoint] = {}
        self._local_llms: dict[str, LLM] = {}
        self._lock = threading.Lock()
        self.slots = RunSlots(concurrency)  # requests answered at once, shared with the MCP and API doors

    # ---- conversations ------------------------------------------------------------------------

    def conversation(self, session: str) -> Conversation:
        evicted = []
        with self._lock:
            conv = self._conversations.get(session)
            if conv is None:
                # A random folder name: the session hash is known to the browser, the folder is not.
                conv = Conversation(Workspace.create(self.workdir, uuid.uuid4().hex), display=self.welcome())
                self._conversations[session] = conv
                # API clients never "leave the page": forget the least recently used idle ones.
                idle = [k for k, c in self._conversations.items() if c.cancel is None and k != session]
                while len(self._conversations) > self.max_conversations and idle:
                    evicted.append(self._conversations.pop(idle.pop(0)))
            self._conversations.move_to_end(session)
        for old in evicted:
            _remove(old)
        return conv

    def reset(self, session: str) -> None:
        """A new conversation for this session: fresh workspace and history."""
        self.drop(session)

    def drop(self, session: str) -> None:
        """Forget a conversation and delete its files (its downloads stay in Gradio's cache)."""
        with self._lock:
            conv = self._conversations.pop(session, None)
        if conv is not None:
            _remove(conv)

    def stop(self, session: str) -> bool:
        with self._lock:
            conv = self._conversations.get(session)
        if conv is None or conv.cancel is None:
            return False
        conv.cancel.set()
        return True

    # ---- parts per request --------------------------------------------------------------------

    def request_settings(self, choice: LLMChoice, *, resolve: bool = True) -> Settings:
        """The server's settings with this session's choices; raises ValueError for bad input.

        `resolve=False` skips the DNS look-up of a typed base URL (for the status line)."""
        s = self.settings
        base_url = choice.base_url.strip() or None
        key = choice.api_key.strip() or None
        if base_url and base_url != s.llm_base_url:
            if not base_url.startswith(("http://", "https://")):
                raise ValueError(f"The LLM base URL must start with http:// or https:// (got `{base_url}`).")
            if self.public_llm_only and resolve:
                try:
                    urlguard.check_url(base_url)
                except urlguard.URLRefused as e:
                    raise ValueError(f"This app only talks to public LLM servers: {e}.") from None
            # Never send the server's own key to a URL somebody typed.
            s = replace(s, llm_base_url=base_url, llm_api_key=key)
        elif key:
            s = replace(s, llm_api_key=key)
        mode = choice.inference or s.inference
        if mode not in INFERENCE_MODES:
            raise ValueError(f"Inference mode must be one of {', '.join(INFERENCE_MODES)}.")
        top_k = int(choice.top_k) if choice.top_k else s.top_k
        return replace(s, llm_model=choice.model.strip() or s.llm_model, inference=mode, top_k=max(1, top_k))

    def llm_for(self, s: Settings) -> LLM:
        if self.llm is not None and (s.llm_base_url, s.llm_model) == (
            self.settings.llm_base_url,
            self.settings.llm_model,
        ):
            return self.llm
        if s.uses_server:
            # A URL a visitor typed: no redirect or second DNS answer may lead to the host's network.
            typed = self.public_llm_only and s.llm_base_url != self.settings.llm_base_url
            return build_llm(
                s, public_only=typed
            )  # a client per request: its call log is this request's trace
        name = s.llm_model or s.local_llm_model
        with self._lock:  # a local model is loaded once and shared
            if name not in self._local_llms:
                self._local_llms[name] = LocalChatLLM(name)
            return self._local_llms[name]

    def endpoint_for(self, mode: str, context: contextvars.Context | None = None) -> Endpoint:
        if self.endpoint is not None:
            return self.endpoint
        with self._lock:  # one local runtime and one hosted client for every session
            if "local" not in self._backends:
                self._backends["local"] = LocalEndpoint()
                self._backends["hosted"] = HostedEndpoint(
                    token=self.settings.hf_token, provider=self.settings.hf_provider
                )
        local = on_gpu(self._backends["local"], context) if mode in ("local", "hybrid") else None
        hosted = self._backends["hosted"] if mode in ("hosted", "hybrid") else None
        return RoutedEndpoint(mode, local=local, hosted=hosted)

    def status(self, choice: LLMChoice) -> str:
        try:
            s = self.request_settings(choice, resolve=False)
        except ValueError as e:
            return f"**Settings problem:** {e}"
        if s.uses_server:
            url = without_credentials(s.llm_base_url or OPENAI_BASE_URL)
            llm = f"{s.llm_model or DEFAULT_SERVER_MODEL} at {url}"
        else:
            llm = f"{s.llm_model or s.local_llm_model} (local transformers; no LLM server configured)"
        endpoint = self.endpoint_for(s.inference).describe()
        return (
            f"**LLM:** {llm} · **Models run:** {endpoint} · "
            f"**Catalog:** {len(self.catalog)} models · top-K {s.top_k}"
        )

    def welcome(self) -> list[dict[str, Any]]:
        if self.settings.uses_server:
            return []
        return [
            {
                "role": "assistant",
                "content": (
                    f"No LLM server is configured, so the controller is the local model "
                    f"`{self.settings.local_llm_model}` (downloaded on first use, slow without a GPU). "
                    + CONFIGURE_HINT
                ),
            }
        ]

    # ---- one request --------------------------------------------------------------------------

    def respond(
        self, session: str, message: dict[str, Any] | str | None, choice: LLMChoice, *, poll: float = 0.05
    ) -> Iterator[tuple[list[dict[str, Any]], list[str], bool]]:
        """Yields (chat messages, trace files, still running) as the request advances."""
        conv = self.conversation(session)
        text, files = _split_message(message)
        if conv.cancel is not None:
            yield conv.display + [_note(BUSY)], conv.traces, True
            return
        if not text and not files:
            yield conv.display, conv.traces, False
            return
        conv.requests += 1
        user = ([{"role": "user", "content": text}] if text else []) + [
            {"role": "user", "content": {"path": f}} for f in files
        ]
        problems = [p for f in files if (p := check_upload(f, max_bytes=self.max_upload_bytes))]
        if problems:
            bad = [{"role": "user", "content": text or "(files only)"}]
            conv.display += bad + [
                _note(
                    "\n\n".join(problems)
                    + "\n\nNothing was run. Send the request again with an image or audio file that opens."
                )
            ]
            yield conv.display, conv.traces, False
            return
        if not text:
            conv.display += user + [_note("What should I do with this file? Send it again with a request.")]
            yield conv.display, conv.traces, False
            return
        try:
            s = self.request_settings(choice)
            pipeline = Pipeline(
                llm=self.llm_for(s),
                catalog=self.catalog,
                endpoint=self.endpoint_for(s.inference, contextvars.copy_context()),
                settings=s,
            )
        except ValueError as e:
            conv.display += user + [_note(f"**Settings problem:** {e}")]
            yield conv.display, conv.traces, False
            return

        cancel = threading.Event()
        with self._lock:  # one request at a time per conversation, also for API clients
            busy = conv.cancel is not None
            if not busy:
                conv.cancel = cancel
        if busy:
            yield conv.display + [_note(BUSY)], conv.traces, True
            return
        conv.display += user
        view = RunView(f"r{conv.requests}")
        events: queue.Queue = queue.Queue()
        worker = threading.Thread(
            target=_drive,
            args=(pipeline, text, conv, [Path(f) for f in files], cancel, events, self.slots),
            name=f"hugginggpt-{session[:8]}",
            daemon=True,
        )
        worker.start()
        try:
            yield conv.display + view.messages, conv.traces, True
            stop_deadline = None
            while view.done is None:
                try:
                    event = events.get(timeout=poll)
                except queue.Empty:
                    if cancel.is_set():
                        stop_deadline = stop_deadline or time.monotonic() + STOP_GRACE_SECONDS
                        if (
                            time.monotonic() > stop_deadline
                        ):  # a blocking call (the LLM) is still out: move on
                            view.feed(Done(Outcome.CANCELLED))
                            break
                    continue
                if event is None:  # the worker ended without Done: cannot happen unless it crashed
                    view.feed(Done(Outcome.FAILED, error=ENDED_EARLY, error_kind=ErrorKind.INTERNAL))
                    break
                view.feed(event)
                while view.done is None:  # coalesce what is already there into one update
                    try:
                        event = events.get_nowait()
                    except queue.Empty:
                        break
                    if event is None:
                        break
                    view.feed(event)
                yield conv.display + view.messages, conv.traces, view.done is None
            self._finish(conv, text, view)
            yield conv.display, conv.traces, False
        finally:
            cancel.set()  # the page went away or the request ended: nothing more runs for it
            conv.cancel = None

    def _finish(self, conv: Conversation, text: str, view: RunView) -> None:
        done = view.done
        assert done is not None
        if done.outcome is Outcome.CANCELLED:
            view.note("Stopped." + (" The partial answer above was kept." if done.answer else ""))
        elif done.error:
            hint = f"\n\n{CONFIGURE_HINT}" if done.error_kind is ErrorKind.LLM else ""
            view.note(f"**Error:** {done.error}{hint}")
        if done.trace_file:
            conv.traces = [*conv.traces, str(done.trace_file)]
        conv.display += view.messages
        conv.history += [{"role": "user", "content": text}]
        conv.history += [{"role": "assistant", "content": done.answer or f"(no answer: {done.error})"}]


def _drive(
    pipeline: Pipeline,
    text: str,
    conv: Conversation,
    files: list[Path],
    cancel: threading.Event,
    events: queue.Queue,
    slots: RunSlots,
) -> None:
    """Runs the pipeline in its own thread, so the chat can give up on it at once when stopped."""
    if not slots.acquire(cancel, refuse_when_busy=False):  # busy with API calls: waits its turn
        events.put(Done(Outcome.CANCELLED))
        return
    run = pipeline.run(
        text, workspace=conv.workspace, files=files, history=list(conv.history), cancelled=cancel
    )
    try:
        for event in run:
            events.put(event)
    except Exception:  # Pipeline.run reports failures in Done; anything else is a bug
        log.exception("the pipeline crashed")
    finally:
        run.close()
        slots.release()
        events.put(None)


def _remove(conv: Conversation) -> None:
    if conv.cancel is not None:
        conv.cancel.set()  # its run stops; files it still writes go with the folder
    shutil.rmtree(conv.workspace.root, ignore_errors=True)


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
