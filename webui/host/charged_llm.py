"""The controller LLM as one visitor's run sees it: every call is charged to the visitor before it
is made (webui.host.token_budget), whichever stage makes it, so no path can make an uncharged call.

The estimate is the call's worst case: its prompt (a token per 3 characters, generous for most
languages) plus the longest reply it may get (its max_tokens, else its character bound). The
reservation is settled with the usage the server reported, or with the estimate when the stream
never said (stopped, hung up, a server that reports no usage); a call that failed before any text
is charged its prompt.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from hugginggpt.llms.interface import LLM, Completion, HangUp, LLMError, Message, StreamEnd
from webui.host.token_budget import DailyTokens

CHARS_PER_TOKEN = 3
TOKENS_PER_MESSAGE = 4  # the role and the separators around each message


class ChargedLLM(LLM):
    def __init__(self, inner: LLM, ledger: DailyTokens, visitor: str) -> None:
        # No LLM.__init__: the call log, limits and stop signal are the wrapped LLM's (__getattr__).
        self.inner, self.ledger, self.visitor = inner, ledger, visitor

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being made): no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.inner, name)

    def recording(self, stop: Any = None) -> LLM:
        return ChargedLLM(self.inner.recording(stop), self.ledger, self.visitor)

    def describe(self) -> str:
        return self.inner.describe()

    def _stream(
        self, messages: list[Message], schema: dict[str, Any] | None, max_tokens: int | None, hang_up: HangUp
    ) -> Generator[str, None, StreamEnd]:
        return self.inner._stream(messages, schema, max_tokens, hang_up)

    def stream(
        self, messages: list[Message], *, stage: str, **options: Any
    ) -> Generator[str, None, Completion]:
        prompt, reply = self.estimate(messages, options.get("max_tokens"), options.get("max_chars"))
        reservation = self.ledger.reserve(self.visitor, prompt + reply)  # BudgetSpent: no call is made
        used = prompt + reply
        try:
            completion = yield from self.inner.stream(messages, stage=stage, **options)
            reported = completion.usage.prompt_tokens + completion.usage.completion_tokens
            used = reported or used
            return completion
        except LLMError:
            used = prompt
            raise
        finally:
            self.ledger.settle(reservation, used)

    def estimate(
        self, messages: list[Message], max_tokens: int | None, max_chars: int | None
    ) -> tuple[int, int]:
        """The call's prompt tokens and the most reply tokens it may get, rounded up."""
        limits = self.inner.limits
        chars = sum(len(str(m.get("content", ""))) for m in messages)
        prompt = -(-chars // CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages)
        reply_chars = min(max_chars or limits.max_reply_chars, limits.max_reply_chars)
        reply = max_tokens or limits.max_tokens or -(-reply_chars // CHARS_PER_TOKEN)
        return prompt, reply
