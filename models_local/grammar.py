"""Grammar-constrained generation for the in-process chat model: a JSON schema as a logits processor.

llguidance compiles the schema into a token-level matcher; before each token the processor masks
every token that would leave the schema, so the reply is JSON of that shape whatever the weights
say. It is chosen over xgrammar for this CPU app (numbers in README.md, "The local LLM"): it compiles
a plan schema in 40-75 ms where xgrammar takes 230-270 ms (a new schema each request: the files and
the candidates change), and it installs as one 8 MB wheel with no dependencies where xgrammar pulls
triton (1 GB). Its mask costs 50-120 us a token, which a real model's forward pass dwarfs.

No runaway: the schema bounds every string and list, and once only `reserve` tokens of the budget
are left the processor takes, among the tokens the grammar allows, the one that closes the JSON
soonest (closing quotes and brackets first, separators next, no new objects), so the reply ends as
complete JSON within the budget.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}
_COMPILED_KEPT = 32  # schemas kept compiled (each a few hundred kB at most)
_CLOSERS = set('"]}')
_SEPARATORS = set('"]},: ')


class GrammarUnavailable(RuntimeError):
    """The schema cannot be enforced here (llguidance missing, a slow tokenizer, an unsupported schema)."""


class TokenTable:
    """What the grammar needs of one tokenizer, built once (about a second for a 150k vocabulary)."""

    def __init__(self, tokenizer: Any, vocab_size: int, eos_ids: list[int]) -> None:
        try:
            import llguidance
            import llguidance.hf
        except ImportError as e:
            raise GrammarUnavailable(f"llguidance is not installed ({e})") from None
        import torch

        try:
            self.lltok = llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size, eos_token=eos_ids)
        except (ValueError, TypeError) as e:  # a slow (Python) tokenizer
            raise GrammarUnavailable(str(e)) from None
        self.vocab_size = vocab_size
        self._compiled: OrderedDict[str, Any] = OrderedDict()  # schema -> a matcher never used
        self._lock = threading.Lock()
        self.closing_rank = torch.tensor(
            [_closing_rank(self._text(i), i in eos_ids) for i in range(vocab_size)], dtype=torch.float32
        )

    def matcher(self, schema: dict[str, Any]) -> Any:
        """A fresh matcher of `schema`: compiled once (25-75 ms), then copied (microseconds) for
        each reply: a request's corrections reuse it, and so do requests with the same files."""
        import llguidance

        key = json.dumps(schema, sort_keys=True)
        with self._lock:
            compiled = self._compiled.get(key)
            if compiled is not None:
                self._compiled.move_to_end(key)
                return compiled.deep_copy()
        try:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults=JSON_OPTIONS)  # type: ignore[arg-type]
        except ValueError as e:
            raise GrammarUnavailable(str(e)) from None
        compiled = llguidance.LLMatcher(self.lltok, grammar, log_level=0)
        if compiled.is_error():
            raise GrammarUnavailable(compiled.get_error())
        with self._lock:
            self._compiled[key] = compiled
            while len(self._compiled) > _COMPILED_KEPT:
                self._compiled.popitem(last=False)
        return compiled.deep_copy()

    def _text(self, token: int) -> str:
        if self.lltok.is_special_token(token):
            return ""
        return self.lltok.decode_bytes([token]).decode("utf-8", "replace")


def _closing_rank(text: str, eos: bool) -> float:
    """Lower closes the JSON sooner: the end itself, then quotes and brackets that close, then
    separators, then anything else; a token that opens an object or a list comes last. Longer
    tokens first within a class (fewer steps for forced text such as a required key)."""
    if eos:
        return -1.0
    if not text:
        return 1e9
    opens = text.count("{") + text.count("[")
    kind = 0 if set(text) <= _CLOSERS else 1 if set(text) <= _SEPARATORS else 2
    return opens * 1e6 + kind * 1e3 - min(len(text), 999)


def closing_reserve(schema: dict[str, Any]) -> int:
    """Tokens kept back to close any reply: the smallest instance of the schema's largest object
    (the closing may begin as one opens) and its longest literal (or half way into one), in bytes:
    a token is at least one byte, so bytes bound tokens."""
    largest = max((_min_bytes(o) for o in _objects(schema)), default=2)
    return largest + _longest_literal(schema) + 8


def _objects(node: Any) -> Any:
    if isinstance(node, dict):
        if node.get("type") == "object":
            yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _objects(value)


def _min_bytes(node: dict[str, Any]) -> int:
    """The length of a smallest instance, taking the longest choice where there is one (the
    closing may be half way into any of them)."""
    if "anyOf" in node:
        return max(_min_bytes(n) for n in node["anyOf"])
    if "enum" in node:
        return max(len(json.dumps(v).encode()) for v in node["enum"])
    kind = node.get("type")
    if kind == "object":
        required = node.get("required", [])
        props = node.get("properties", {})
        return 2 + sum(len(json.dumps(k)) + 4 + _min_bytes(props.get(k, {})) for k in required)
    if kind == "array":
        return 2
    if kind == "integer":
        return len(str(node.get("maximum", 10**6))) + 1
    if kind == "string":
        return 2 + (16 if "pattern" in node else 0)  # a pattern's shortest text: a reference, a name
    return 8


def _longest_literal(node: Any) -> int:
    if isinstance(node, dict):
        own = max((len(json.dumps(v).encode()) for v in node.get("enum", [])), default=0)
        return max([own, *(_longest_literal(v) for v in node.values())])
    if isinstance(node, list):
        return max((_longest_literal(v) for v in node), default=0)
    return 0


class JsonGrammar:
    """A logits processor (transformers' protocol) that keeps one reply inside `schema` and closes
    it within `budget` new tokens. One per reply: it follows that reply's tokens."""

    def __init__(self, table: TokenTable, schema: dict[str, Any], *, budget: int) -> None:
        self.matcher = table.matcher(schema)
        self.table = table
        self.reserve = closing_reserve(schema)
        self.budget = max(budget, self.reserve)  # room for the smallest reply, whatever was asked
        self._prompt_length: int | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self._prompt_length is None:
            self._prompt_length = int(input_ids.shape[-1])
        elif not self.matcher.consume_token(int(input_ids[0, -1])):
            log.warning("the grammar refused a token it had allowed: %s", self.matcher.get_error())
        written = int(input_ids.shape[-1]) - self._prompt_length
        width = min(scores.shape[-1], self.table.vocab_size)
        # A byte a token, 0 where the grammar forbids it: cheaper to read than the packed bitmask.
        allowed = torch.from_numpy(
            np.frombuffer(self.matcher.compute_logit_bias(), dtype=np.uint8)[:width] != 0
        )
        if self.budget - written <= self.reserve:  # closing: the allowed token that ends it soonest
            ranks = torch.where(allowed, self.table.closing_rank[:width], float("inf"))
            chosen = int(ranks.argmin())
            scores.fill_(float("-inf"))
            scores[:, chosen] = 0.0
            return scores
        scores[:, width:] = float("-inf")
        scores[:, :width].masked_fill_(allowed.logical_not().to(scores.device), float("-inf"))
        return scores

    @property
    def finished(self) -> bool:
        """The reply so far is complete JSON of the schema."""
        return self.matcher.is_accepting()
