"""A transformers chat model run in-process: the controller LLM when no server is configured.

The model loads once, through the process-wide load gate (building a model changes process-wide
torch state, so it takes its turn with the runtime's loads). Each reply is generated in a thread of
its own and streamed piece by piece; a stop signal, or closing the stream, ends generation at the
next token. Weights come from a local folder or the HF cache (downloaded on first use when online).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

from models_local.gate import loading
from models_local.grammar import GrammarUnavailable, JsonGrammar, TokenTable
from models_local.sizing import loaded_size, mib

log = logging.getLogger(__name__)


class ChatError(RuntimeError):
    """The chat model could not answer; the message is the cause, for the caller to phrase."""


class ChatFrameworkMissing(ChatError):
    """transformers or torch is not installed."""


class ChatLoadFailed(ChatError):
    """The model could not be loaded: missing, unreadable, or not a causal language model."""


class NoChatTemplate(ChatError):
    """The model has no chat template (a base model): it cannot take a conversation."""


class GenerationFailed(ChatError):
    """generate() raised while writing the reply."""


class ChatModel:
    """One chat model, loaded on first use and shared by every caller (replies may overlap)."""

    def __init__(self, source: str, *, max_new_tokens: int = 1024) -> None:
        self.source = source  # a hub id or a local folder
        self.max_new_tokens = max_new_tokens
        self._loaded: tuple[Any, Any] | None = None  # (tokenizer, model)
        self._lock = threading.Lock()
        self._tokens: TokenTable | None = None  # for grammars, built on the first schema

    def load(self) -> tuple[Any, Any]:
        """(tokenizer, model), loading them the first time."""
        with self._lock:
            if self._loaded is None:
                self._loaded = self._load()
            return self._loaded

    def _load(self) -> tuple[Any, Any]:
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:
            raise ChatFrameworkMissing(str(e)) from e
        started = time.monotonic()
        try:
            with loading():  # dtype "auto": maybe half precision
                tokenizer = AutoTokenizer.from_pretrained(self.source)
                model = AutoModelForCausalLM.from_pretrained(self.source, dtype="auto")
        except Exception as e:  # missing folder or repo, unknown architecture, unreadable weights
            log.info("refused chat model %s: %s", self.source, e)
            raise ChatLoadFailed(str(e)) from None
        log.info(
            "loaded chat model %s in %.1f s (%s)",
            self.source,
            time.monotonic() - started,
            mib(loaded_size(model)),
        )
        return tokenizer, model.eval()

    def reply(
        self,
        messages: list[dict[str, str]],
        *,
        stop: Any = None,
        schema: dict[str, Any] | None = None,
        max_new_tokens: int | None = None,
    ) -> Reply:
        """The reply to a conversation, generated as it is read. `stop` (anything with is_set())
        ends generation at the next token, as closing the reply does. With `schema`, only tokens
        that keep the reply inside that JSON schema are written (`Reply.constrained` says whether
        it could be enforced), and the JSON is closed within the token budget."""
        tokenizer, model = self.load()
        if not getattr(tokenizer, "chat_template", None):
            raise NoChatTemplate(f"{self.source} has no chat template")
        inputs = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        budget = min(max_new_tokens or self.max_new_tokens, self.max_new_tokens)
        grammar = self._grammar(schema, budget) if schema is not None else None
        budget = grammar.budget if grammar is not None else budget
        return Reply(tokenizer, model, inputs, max_new_tokens=budget, stop=stop, grammar=grammar)

    def _grammar(self, schema: dict[str, Any], budget: int) -> JsonGrammar | None:
        """The schema as a grammar; None (plain generation, as a server that refuses a schema)
        where it cannot be enforced: the caller's checks still read the reply."""
        tokenizer, model = self.load()
        try:
            with self._lock:
                if self._tokens is None:
                    width, ends = _vocab_size(tokenizer, model), _eos_ids(tokenizer, model)
                    self._tokens = TokenTable(tokenizer, width, ends)
            return JsonGrammar(self._tokens, schema, budget=budget)
        except GrammarUnavailable as e:
            log.warning("%s: replying without a grammar: %s", self.source, e)
            return None


def _vocab_size(tokenizer: Any, model: Any) -> int:
    """The width of the model's logits (often padded past the tokenizer's last id)."""
    head = model.get_output_embeddings()
    return max(len(tokenizer), int(head.weight.shape[0]) if head is not None else 0)


def _eos_ids(tokenizer: Any, model: Any) -> list[int]:
    """Every id that ends a reply: the generation config's (a chat model may have several) and the
    tokenizer's."""
    configured = getattr(model.generation_config, "eos_token_id", None)
    ids = configured if isinstance(configured, list) else [configured]
    return sorted({i for i in [*ids, tokenizer.eos_token_id] if isinstance(i, int)})


class Reply:
    """Iterate for the text pieces; the token counts are complete once the iteration ends."""

    def __init__(
        self,
        tokenizer: Any,
        model: Any,
        inputs: Any,
        *,
        max_new_tokens: int,
        stop: Any,
        grammar: JsonGrammar | None = None,
    ) -> None:
        self._tokenizer, self._model, self._inputs = tokenizer, model, inputs
        self._max_new_tokens = max_new_tokens
        self._stop = stop
        self._grammar = grammar
        self.constrained = grammar is not None
        self._closed = threading.Event()
        self.prompt_tokens = int(inputs["input_ids"].shape[-1])
        self.completion_tokens = 0

    def close(self) -> None:
        """Nobody reads on (Stop pressed, stream closed): generation ends at the next token."""
        self._closed.set()

    def _stopped(self) -> bool:
        return self._closed.is_set() or (self._stop is not None and self._stop.is_set())

    def __iter__(self) -> Iterator[str]:
        from transformers import (
            LogitsProcessorList,
            StoppingCriteria,
            StoppingCriteriaList,
            TextIteratorStreamer,
        )

        streamer = TextIteratorStreamer(self._tokenizer, skip_prompt=True, skip_special_tokens=True)
        stopped = self._stopped

        class WhenStopped(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                import torch

                return torch.full((input_ids.shape[0],), stopped(), dtype=torch.bool, device=input_ids.device)

        generated: list[Any] = []
        failed: list[Exception] = []

        def generate() -> None:
            try:
                generated.append(
                    self._model.generate(
                        **self._inputs,
                        streamer=streamer,
                        max_new_tokens=self._max_new_tokens,
                        do_sample=False,
                        stopping_criteria=StoppingCriteriaList([WhenStopped()]),
                        logits_processor=LogitsProcessorList([self._grammar] if self._grammar else []),
                    )
                )
            except Exception as e:  # reported below; ending the streamer keeps the reader from hanging
                failed.append(e)
                streamer.end()

        worker = threading.Thread(target=generate, daemon=True, name="local-llm-generate")
        worker.start()
        try:
            for piece in streamer:
                if piece:
                    yield piece
        finally:
            self.close()  # a no-op when generation is over; else it stops at the next token
        worker.join()
        if failed:
            raise GenerationFailed(str(failed[0]))
        if generated:
            self.completion_tokens = int(generated[0].shape[-1]) - self.prompt_tokens
