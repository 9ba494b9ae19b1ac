"""The controller LLM on any OpenAI-compatible server (OpenAI, Azure, vLLM, TGI, Ollama, llama.cpp,
LM Studio, Hugging Face Inference Providers), through the openai package."""

from __future__ import annotations

import logging
import socket
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from hugginggpt.files import urlguard
from hugginggpt.llms.interface import (
    LLM,
    HangUp,
    LLMError,
    LLMLimits,
    Message,
    StreamEnd,
    Usage,
    _usage,
    shut,
)
from hugginggpt.text import shorten

if TYPE_CHECKING:
    from openai.types.shared_params import ResponseFormatJSONSchema

log = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"  # where a key without a base URL goes


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
        limits: LLMLimits | None = None,
    ):
        """`public_only`: every request, redirects included, goes only to a public address, the one
        that was checked (for base URLs that visitors of a public app type)."""
        super().__init__(limits)
        import openai  # light, but keeps `hugginggpt.llms.interface` importable without it

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

    def _stream(
        self, messages: list[Message], schema: dict[str, Any] | None, max_tokens: int | None, hang_up: HangUp
    ) -> Generator[str, None, StreamEnd]:
        import openai

        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if max_tokens:
            kwargs["max_tokens"] = max_tokens
        response_format: ResponseFormatJSONSchema | None = None
        if schema is not None and self._learnt.get("json_schema") is not False:
            response_format = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
        json_mode = response_format is not None
        try:
            if response_format is not None:
                try:
                    chunks = self._client.chat.completions.create(**kwargs, response_format=response_format)
                    self._learnt["json_schema"] = True
                except (openai.BadRequestError, openai.UnprocessableEntityError):
                    # Maybe the server refuses structured output: plain text from now on.
                    log.info(
                        "%s refused structured output; asking for plain text from now on", self.describe()
                    )
                    chunks = self._client.chat.completions.create(**kwargs)
                    self._learnt["json_schema"] = json_mode = False
            else:
                chunks = self._client.chat.completions.create(**kwargs)
            hang_up.on(lambda: shut(_socket_of(chunks.response)))
            return (yield from self._read(chunks, json_mode))
        except openai.APIError as e:
            raise LLMError(self._explain(e)) from None

    def _read(self, chunks: Any, json_mode: bool) -> Generator[str, None, StreamEnd]:
        seen = False
        usage, reason, model = Usage(), None, None
        with chunks:  # closes the connection when the reader stops early: the server stops generating
            for chunk in chunks:
                if not hasattr(chunk, "choices"):  # a body that is not an event stream
                    break
                seen = True
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                model = getattr(chunk, "model", None) or model
                for choice in chunk.choices or []:
                    reason = choice.finish_reason or reason
                    if choice.delta and choice.delta.content:
                        yield choice.delta.content
        if not seen:  # a real stream sends at least its end; this was not an event stream at all
            raise LLMError(self._not_an_api())
        return StreamEnd(usage, reason is not None, json_mode, str(reason) if reason else None, model)

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


def _socket_of(response: Any) -> socket.socket | None:
    """The socket an httpx response is read from (httpcore's `network_stream` extension)."""
    stream = response.extensions.get("network_stream")
    return stream.get_extra_info("socket") if stream is not None else None


def without_credentials(url: str) -> str:
    """`url` with any user:password@ and every query value blanked (`?api-key=...` is as secret): the
    base URL goes into errors, status lines and traces."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        parts = parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1])
    if parts.query:
        blanked = [(name, "***") for name, _ in parse_qsl(parts.query, keep_blank_values=True)]
        parts = parts._replace(query=urlencode(blanked, safe="*"))
    return urlunsplit(parts)


def _refusal(error: BaseException) -> str | None:
    """The urlguard refusal behind a connection error, if that is what it was."""
    seen = error.__cause__
    while seen is not None and not isinstance(seen, urlguard.URLRefused):
        seen = seen.__cause__
    return str(seen) if seen is not None else None
