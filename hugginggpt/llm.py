"""The controller LLM behind one small interface.

`OpenAICompatibleLLM` speaks to any OpenAI-compatible server (OpenAI, Azure, vLLM, TGI, Ollama,
llama.cpp, LM Studio, Hugging Face Inference Providers); `llm_local.LocalChatLLM` runs a chat model
in-process when no server is configured.
"""

from __future__ import annotations

import copy
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import urlguard
from .text import shorten

OPENAI_BASE_URL = "https://api.openai.com/v1"  # where a key without a base URL goes

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


@dataclass
class LLMCall:
    """One call, as kept in the trace."""

    stage: str
    messages: list[Message]
    reply: str = ""
    seconds: float = 0.0
    usage: Usage = field(default_factory=Usage)
    json_mode: bool = False
    error: str | None = None


class LLM(ABC):
    """Subclasses implement `_complete` and `_stream`; this class does timing and bookkeeping."""

    def __init__(self) -> None:
        self.calls: list[LLMCall] = []
        self._lock = threading.Lock()

    def recording(self) -> LLM:
        """This LLM with a call log of its own: one per request, so that concurrent requests
        never see each other's prompts. Clients, loaded weights and learnt capabilities are shared."""
        view = copy.copy(self)
        view.calls = []
        view._lock = threading.Lock()
        return view

    @abstractmethod
    def describe(self) -> str:
        """Which model at which endpoint, for status lines and errors. Never the key."""

    @abstractmethod
    def _complete(self, messages: list[Message], schema: dict[str, Any] | None, call: LLMCall) -> str: ...

    @abstractmethod
    def _stream(self, messages: list[Message], call: LLMCall) -> Iterator[str]: ...

    def complete(self, messages: list[Message], *, stage: str, schema: dict[str, Any] | None = None) -> str:
        """The whole reply. With `schema`, ask for JSON of that shape where the server supports it."""
        call, started = self._start(stage, messages)
        try:
            call.reply = self._complete(messages, schema, call)
            return call.reply
        except LLMError as e:
            call.error = str(e)
            raise
        finally:
            call.seconds = time.perf_counter() - started

    def stream(self, messages: list[Message], *, stage: str) -> Iterator[str]:
        """The reply piece by piece, as the server sends it."""
        call, started = self._start(stage, messages)
        parts: list[str] = []
        try:
            for delta in self._stream(messages, call):
                parts.append(delta)
                yield delta
        except LLMError as e:
            call.error = str(e)
            raise
        finally:
            call.reply = "".join(parts)
            call.seconds = time.perf_counter() - started

    def _start(self, stage: str, messages: list[Message]) -> tuple[LLMCall, float]:
        call = LLMCall(stage=stage, messages=[dict(m) for m in messages])
        with self._lock:
            self.calls.append(call)
        return call, time.perf_counter()


class OpenAICompatibleLLM(LLM):
    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str = "gpt-4o-mini",
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float = 0.0,
        public_only: bool = False,
    ):
        """`public_only`: every request, redirects included, goes only to a public address, the one
        that was checked (for base URLs that visitors of a public app type)."""
        super().__init__()
        import openai  # light, but keeps `hugginggpt.llm` importable without it

        self.base_url = base_url or OPENAI_BASE_URL
        self.model = model
        self.temperature = temperature
        self._secret = api_key  # only to blank it out of error messages that echo it
        # Rate limits, 5xx and time-outs are retried by the client itself, with back-off.
        try:
            self._client = openai.OpenAI(
                base_url=self.base_url,
                api_key=api_key or "not-needed",
                timeout=timeout,
                max_retries=max_retries,
                http_client=urlguard.public_only_client(timeout) if public_only else None,
            )
        except Exception as e:  # the HTTP client's own URL error type; a typed URL is the user's input
            raise ValueError(
                f"the LLM base URL {self.base_url} is not a usable URL: {shorten(str(e))}"
            ) from None
        self._learnt: dict[str, bool] = {}  # shared by recording() views, e.g. whether json_schema works

    def describe(self) -> str:
        return f"{self.model} at {without_credentials(self.base_url)}"

    def _complete(self, messages: list[Message], schema: dict[str, Any] | None, call: LLMCall) -> str:
        import openai

        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if schema is not None and self._learnt.get("json_schema") is not False:
            response_format = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
            try:
                response = self._client.chat.completions.create(**kwargs, response_format=response_format)
            except (openai.BadRequestError, openai.UnprocessableEntityError):
                # Maybe the server refuses structured output: try plain text, and if that works,
                # remember not to ask again.
                text = self._text(self._create(**kwargs), call)
                self._learnt["json_schema"] = False
                return text
            except openai.APIError as e:
                raise LLMError(self._explain(e)) from None
            self._learnt["json_schema"] = True
            call.json_mode = True
            return self._text(response, call)
        return self._text(self._create(**kwargs), call)

    def _create(self, **kwargs: Any) -> Any:
        import openai

        try:
            return self._client.chat.completions.create(**kwargs)
        except openai.APIError as e:
            raise LLMError(self._explain(e)) from None

    def _text(self, response: Any, call: LLMCall) -> str:
        if not hasattr(response, "choices"):  # the openai client hands back a non-JSON body as a str
            raise LLMError(self._not_an_api())
        if response.usage is not None:
            call.usage = _usage(response.usage)
        if not response.choices:
            raise LLMError(f"The LLM ({self.describe()}) sent a reply with no choices")
        return response.choices[0].message.content or ""

    def _stream(self, messages: list[Message], call: LLMCall) -> Iterator[str]:
        import openai

        try:
            chunks = self._client.chat.completions.create(
                model=self.model,
                messages=messages,
                temperature=self.temperature,
                stream=True,
                stream_options={"include_usage": True},
            )
            seen = False
            with chunks:  # closes the connection when the reader stops early: the server stops generating
                for chunk in chunks:
                    seen = True
                    if chunk.usage is not None:
                        call.usage = _usage(chunk.usage)
                    if chunk.choices and chunk.choices[0].delta.content:
                        yield chunk.choices[0].delta.content
        except openai.APIError as e:
            raise LLMError(self._explain(e)) from None
        if not seen:  # a real stream sends at least its end; this was not an event stream at all
            raise LLMError(self._not_an_api())

    def _not_an_api(self) -> str:
        return (
            f"The LLM {self.describe()} failed: it did not answer like an OpenAI-compatible API "
            "(check the base URL: it usually ends in /v1)"
        )

    def _hide(self, text: str) -> str:
        """Some servers echo the key they refuse: it must not reach the chat, a log or a trace."""
        return text.replace(self._secret, "***") if self._secret and len(self._secret) >= 4 else text

    def _explain(self, error: Exception) -> str:
        import openai

        if isinstance(error, openai.APITimeoutError):
            cause = "it did not answer in time"
        elif isinstance(error, openai.APIConnectionError):
            refused = _refusal(error)
            cause = f"it is not public: {refused}" if refused else "it could not be reached"
        elif isinstance(error, openai.RateLimitError):
            cause = "it is rate limiting requests (HTTP 429); wait and try again"
        elif isinstance(error, openai.AuthenticationError):
            cause = "it refused the API key (HTTP 401); check the key"
        elif isinstance(error, openai.APIStatusError):
            cause = f"it answered HTTP {error.status_code}: {shorten(self._hide(error.message))}"
        else:
            cause = shorten(self._hide(str(error)))
        return f"The LLM {self.describe()} failed: {cause}"


def without_credentials(url: str) -> str:
    """`url` with any user:password@ blanked: the base URL goes into errors, status lines and traces."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def _refusal(error: BaseException) -> str | None:
    """The urlguard refusal behind a connection error, if that is what it was."""
    seen = error.__cause__
    while seen is not None and not isinstance(seen, urlguard.URLRefused):
        seen = seen.__cause__
    return str(seen) if seen is not None else None
