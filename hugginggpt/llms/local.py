"""The controller LLM run in-process, when no server is configured: a thin adapter over
models_local.chat, which holds the transformers code. models_local is imported on first use, so
the core imports no model framework."""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hugginggpt.llms.interface import LLM, HangUp, LLMError, LLMLimits, Message, StreamEnd, Usage
from hugginggpt.text import shorten

FRAMEWORK_MISSING = "The local LLM needs transformers and torch: pip install -r requirements.txt"


class LocalChatLLM(LLM):
    """A transformers chat model run in-process; weights from the HF cache or downloaded on first use."""

    def __init__(self, model: str, *, max_new_tokens: int = 1024, limits: LLMLimits | None = None):
        super().__init__(limits)
        self.model = model
        self.max_new_tokens = max_new_tokens
        self._shared: dict[str, Any] = {}  # shared by recording() views: the weights load once
        self._shared_lock = threading.Lock()

    def describe(self) -> str:
        return f"{self.model} (local transformers)"

    def _chat(self) -> Any:
        with self._shared_lock:
            if "chat" not in self._shared:
                self._check_reachable()
                try:
                    from models_local.chat import ChatModel
                except ImportError as e:
                    raise LLMError(FRAMEWORK_MISSING) from e
                self._shared["chat"] = ChatModel(self.model, max_new_tokens=self.max_new_tokens)
            return self._shared["chat"]

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """models_local's errors, phrased for the person who chose this model."""
        from models_local import chat

        try:
            yield
        except chat.ChatFrameworkMissing as e:
            raise LLMError(FRAMEWORK_MISSING) from e
        except chat.ChatLoadFailed as e:
            raise LLMError(f"The local LLM {self.model} could not be loaded: {shorten(str(e))}") from None
        except chat.NoChatTemplate:
            raise LLMError(
                f"The local LLM {self.model} has no chat template: choose an instruction-tuned (chat) model, "
                "or an OpenAI-compatible server"
            ) from None
        except chat.GenerationFailed as e:
            raise LLMError(f"The local LLM {self.model} failed: {shorten(str(e))}") from None

    def _check_reachable(self) -> None:
        """Fail in seconds, before torch is even imported, when the weights cannot come: not after
        the download's retries."""
        from huggingface_hub import HfApi, constants, snapshot_download

        if Path(self.model).expanduser().is_dir():
            return
        try:
            snapshot_download(self.model, local_files_only=True)
            return
        except (OSError, ValueError):  # not in the HF cache, or not a repo id
            pass
        why = "it is not downloaded"
        if constants.HF_HUB_OFFLINE:
            raise LLMError(
                f"The local LLM {self.model} could not be loaded: {why}, and HF_HUB_OFFLINE is set"
            )
        try:
            HfApi().model_info(self.model, timeout=5)
        except Exception as e:  # no network, unknown repo, gated
            reason = shorten(str(e), 200)
            raise LLMError(
                f"The local LLM {self.model} could not be loaded: {why}, "
                f"and the Hugging Face Hub did not give it ({reason})"
            ) from None

    def prepare(self) -> None:
        """Load the model now (at app start), so the first request does not wait for it."""
        with self._errors():
            self._chat().load()

    def _stream(
        self, messages: list[Message], schema: dict[str, Any] | None, max_tokens: int | None, hang_up: HangUp
    ) -> Generator[str, None, StreamEnd]:
        """With `schema` the reply is generated under a grammar of it (models_local.grammar): only
        tokens that keep it inside the schema, closed within `max_tokens`."""
        chat = self._chat()
        with self._errors():
            reply = chat.reply(messages, schema=schema, max_new_tokens=max_tokens)
            hang_up.on(reply.close)  # at the deadline generation stops at the next token
            yield from reply  # closing this stream closes the reply: generation stops at the next token
        return StreamEnd(Usage(reply.prompt_tokens, reply.completion_tokens), json_mode=reply.constrained)
