"""The controller LLM behind one small interface: `LLM` (streaming, limits, hang-up, the call log
that traces and budgets read) and the records of its calls.

`llm_openai.OpenAICompatibleLLM` speaks to any OpenAI-compatible server (OpenAI, Azure, vLLM, TGI,
Ollama, llama.cpp, LM Studio, Hugging Face Inference Providers); `llm_local.LocalChatLLM` runs a chat
model in-process when no server is configured.
"""

from __future__ import annotations

import copy
import logging
import queue
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator
from contextlib import closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": str}


class LLMError(RuntimeError):
    """The LLM backend failed (unreachable, rate limited, server error). Not the model's fault."""


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens


def _usage(reported: Any) -> Usage:
    """An OpenAI response's usage; servers may leave either count out."""
    return Usage(reported.prompt_tokens or 0, reported.completion_tokens or 0)


@dataclass(frozen=True)
class StreamEnd:
    """What a backend knows once its stream is over."""

    usage: Usage = field(default_factory=Usage)
    finished: bool = True  # the server said the reply was complete (a finish reason)
    json_mode: bool = False  # the reply was asked for as structured output
    finish_reason: str | None = None  # as the server said it ("stop", "length", ...)
    model: str | None = None  # the model that answered, as the server named it


@dataclass(frozen=True)
class Completion:
    """A whole reply. `cut` says why it is incomplete (None: the server finished it)."""

    text: str
    usage: Usage = field(default_factory=Usage)
    json_mode: bool = False
    cut: str | None = None


@dataclass(frozen=True)
class LLMLimits:
    """Bounds on one call, however the server behaves."""

    max_reply_chars: int = 200_000  # a longer reply is cut here
    max_seconds: float = 120.0  # the whole call, wall clock, also for a server that trickles bytes
    max_tokens: int | None = None  # asked of the server (it may ignore it)


@dataclass
class LLMCall:
    """One call, as kept in the trace."""

    stage: str
    messages: list[Message]
    reply: str = ""
    seconds: float = 0.0
    usage: Usage = field(default_factory=Usage)
    json_mode: bool = False
    cut: str | None = None
    error: str | None = None
    started: float = field(default_factory=time.time)  # wall clock, for the call's span
    first_piece_seconds: float | None = None  # time to the reply's first text
    finish_reason: str | None = None
    response_model: str | None = None


class HangUp:
    """Ends one call from outside the thread that reads it: each registered action runs once (shut
    the connection's socket, stop a generation), at once if registered after the hang-up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._actions: list[Any] = []
        self.done = False

    def on(self, action: Any) -> None:
        with self._lock:
            if not self.done:
                self._actions.append(action)
                return
        action()

    def __call__(self) -> None:
        with self._lock:
            self.done, actions, self._actions = True, self._actions, []
        for action in actions:
            action()


_POLL_S = 0.05  # how often a waiting call looks at its run's stop signal
_QUEUED = 64  # pieces read ahead of the caller: the reader waits, so memory stays bounded
_END = object()


class LLM(ABC):
    """Subclasses implement `_stream`; this class bounds it, times it and keeps the call log.

    The backend is read in a thread of its own and waited for here, so the limits are wall-clock
    deadlines kept from outside the read: at `max_seconds`, or once the run's `stop` is set (Stop,
    or the request's own deadline), the call is hung up (its connection shut) and the caller moves on
    whatever the server does, a byte every second included."""

    def __init__(self, limits: LLMLimits | None = None) -> None:
        self.limits = limits or LLMLimits()
        self.calls: list[LLMCall] = []
        self._lock = threading.Lock()
        self.stop: threading.Event | None = None
        self.watchers: list[Any] = []  # observe.Observer: see each call start and end

    def recording(self, stop: threading.Event | None = None) -> LLM:
        """This LLM with a call log of its own: one per request, so that concurrent requests
        never see each other's prompts. Clients, loaded weights and learnt capabilities are shared.
        `stop`: once set, the call in flight ends and no call waits any more (the run gave up)."""
        view = copy.copy(self)
        view.calls = []
        view._lock = threading.Lock()
        view.stop = stop
        view.watchers = []
        return view

    @abstractmethod
    def describe(self) -> str:
        """Which model at which endpoint, for status lines and errors. Never the key."""

    @abstractmethod
    def _stream(
        self, messages: list[Message], schema: dict[str, Any] | None, max_tokens: int | None, hang_up: HangUp
    ) -> Generator[str, None, StreamEnd]:
        """The reply piece by piece; returns how it ended. Raises LLMError when the backend fails.
        Closing the generator must release the connection (the server stops generating); `hang_up`
        takes what ends the call from another thread, while a read blocks."""

    def complete(
        self,
        messages: list[Message],
        *,
        stage: str,
        schema: dict[str, Any] | None = None,
        on_piece: Callable[[str], None] | None = None,
    ) -> Completion:
        """The whole reply. With `schema`, ask for JSON of that shape where the server supports it.

        A reply that takes longer than the limit is an LLMError; a longer one is cut (`cut` says so).
        `on_piece` sees each piece as it arrives; an exception it raises ends the call there."""
        steps = self.stream(messages, stage=stage, schema=schema)
        with closing(steps):
            while True:
                try:
                    piece = next(steps)
                except StopIteration as end:
                    completion: Completion = end.value
                    break
                if on_piece is not None:
                    on_piece(piece)
        if completion.cut and completion.cut.startswith(_SLOW):
            raise LLMError(f"The LLM {self.describe()} failed: {completion.cut}")
        return completion

    def stream(
        self,
        messages: list[Message],
        *,
        stage: str,
        schema: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        max_chars: int | None = None,
    ) -> Generator[str, None, Completion]:
        """The reply piece by piece, as the server sends it; returns the whole Completion.

        Bounded by `limits`: past the size or the time (wall clock), reading stops and the reply is
        cut; once `stop` is set, too. A connection that breaks after some text ends the reply there,
        cut; before any, LLMError."""
        call = LLMCall(stage=stage, messages=[dict(m) for m in messages])
        with self._lock:
            self.calls.append(call)
        for watcher in self.watchers:
            watcher.llm_started(call)
        started = time.monotonic()
        deadline = started + self.limits.max_seconds
        max_chars = min(max_chars or self.limits.max_reply_chars, self.limits.max_reply_chars)
        parts: list[str] = []
        size = 0
        end = StreamEnd(finished=False)
        hang_up = HangUp()
        pieces: queue.Queue = queue.Queue(maxsize=_QUEUED)
        backend = self._stream(messages, schema, max_tokens or self.limits.max_tokens, hang_up)
        reader = threading.Thread(
            target=_read_into,
            args=(backend, pieces, hang_up),
            name=f"llm-{stage}",
            daemon=True,
        )
        reader.start()
        try:
            while True:
                kind, value = self._next(pieces, deadline)
                if kind is _END:
                    end = value or StreamEnd()
                    call.cut = None if end.finished else "the LLM's reply ended before the server finished it"
                    break
                if kind == "late":
                    call.cut = f"{_SLOW} {self.limits.max_seconds:g} s"
                    break
                if kind == "stopped":
                    call.cut = "the run was stopped"
                    break
                if kind == "error":
                    if not parts or not isinstance(value, LLMError):
                        raise value
                    call.cut = f"the connection to the LLM broke ({value})"
                    break
                piece = value[: max_chars - size]
                if call.first_piece_seconds is None:
                    call.first_piece_seconds = time.monotonic() - started
                size += len(piece)
                parts.append(piece)
                yield piece
                if size >= max_chars:
                    call.cut = f"the reply was longer than {max_chars:,} characters"
                    break
        except LLMError as e:
            call.error = str(e)
            raise
        finally:
            hang_up()  # stops the server generating what nobody will read, now, whatever it sends
            call.reply = "".join(parts)
            call.seconds = time.monotonic() - started
            call.usage, call.json_mode = end.usage, end.json_mode
            call.finish_reason, call.response_model = end.finish_reason, end.model
            for watcher in self.watchers:
                watcher.llm_ended(call)
        return Completion(call.reply, call.usage, call.json_mode, call.cut)

    def _next(self, pieces: queue.Queue, deadline: float) -> tuple[Any, Any]:
        """The reader's next item, or ("late", None) at the deadline, or ("stopped", None)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "late", None
            if self.stop is not None and self.stop.is_set():
                return "stopped", None
            try:
                return pieces.get(timeout=min(left, _POLL_S) if self.stop is not None else left)
            except queue.Empty:
                continue


def _read_into(stream: Generator[str, None, StreamEnd], pieces: queue.Queue, hang_up: HangUp) -> None:
    """The reader's thread: the backend's pieces into the queue, until it ends or the call is hung up."""
    try:
        while _put(pieces, ("piece", next(stream)), hang_up):
            pass
    except StopIteration as end:
        _put(pieces, (_END, end.value), hang_up)
    except Exception as e:  # noqa: BLE001 (handed to the waiting caller, who raises it)
        _put(pieces, ("error", e), hang_up)
    finally:
        stream.close()


def _put(pieces: queue.Queue, item: tuple[Any, Any], hang_up: HangUp) -> bool:
    """Waits while the caller is behind; False once nobody will read any more."""
    while not hang_up.done:
        try:
            pieces.put(item, timeout=_POLL_S)
            return True
        except queue.Full:
            continue
    return False


def shut(sock: socket.socket | None) -> None:
    """Ends a connection from another thread: a read blocked on it returns at once."""
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # already closed
            pass


_SLOW = "it did not finish its reply within"
