"""Plans that always parse: the in-process LLM with and without the grammar of the plan schema.

Over a fixed set of requests of the few-shot demos' shapes (hugginggpt/prompts/demos.yaml: each
demo's request and files, with a numbered variant of the wording, cycling), the planner runs on a
local chat model through LocalChatLLM, once under the grammar of the plan schema (models_local/
grammar.py) and once without it (as before the grammar). For each side it reports
  schema-valid      share of first replies that parse as JSON and validate against the plan schema
                    (under the grammar this must be 100%)
  plan-valid        share of first replies that pass the planner's own checks (what no schema can
                    say: dependencies on earlier tasks, references, files)
  corrections/req   rejected plans per request: each asks for a correction round (an LLM call),
                    taken while --retries allow (default 0: the first plan's verdict, and half the
                    run's time; the rounds after it are as random as the first)
  tokens/s          completion tokens over the seconds of the calls (same model, same prompts)
  first task (s)    median seconds from the call to the first task object the plan scanner reads
                    (plan_stream.TaskScanner, as streaming execution does); "-" if none closed

The default model is the tests' tiny random-weight chat model (tests/tiny_text_audio.py): its
replies are noise, so the numbers measure the grammar, not planning skill. `--model` takes any
local chat model folder (the default Qwen2.5-1.5B-Instruct where its weights are present). The
default run is short (under 2 minutes on a loaded 2-core machine): all requests under the grammar,
the first `--baseline` of them without it (random weights never write JSON, so a few show it).

    python bench/plan_grammar.py [--requests 50] [--baseline 5] [--budget 200] [--retries 0]
        [--model PATH] [--prompt short|full]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import jsonschema  # noqa: E402

from hugginggpt import prompts  # noqa: E402
from hugginggpt import tasks as task_types  # noqa: E402
from hugginggpt.llms.interface import LLM, HangUp, Message  # noqa: E402
from hugginggpt.llms.local import LocalChatLLM  # noqa: E402
from hugginggpt.stages.plan import FileRules, PlanLimits  # noqa: E402
from hugginggpt.stages.plan_schema import plan_schema  # noqa: E402
from hugginggpt.stages.plan_stream import TaskScanner  # noqa: E402
from hugginggpt.stages.planner import FileInfo, make_plan  # noqa: E402

WORDINGS = ("", " Please.", " Thanks!", " Quickly, if you can.", " I need it for a report.", " Go ahead.")
SHORT_SYSTEM = (
    'You plan tasks for HuggingGPT. Reply with JSON only: {"tasks": [{"task": ..., "id": 0, '
    '"dep": [-1], "args": {...}}]}.'
)


def requests(count: int) -> list[tuple[str, dict[str, str]]]:
    """`count` requests: the demos in order, again and again, each time in another wording."""
    demos = prompts.demos()
    return [
        (
            demos[i % len(demos)]["request"] + WORDINGS[(i // len(demos)) % len(WORDINGS)],
            demos[i % len(demos)]["files"] or {},
        )
        for i in range(count)
    ]


class Unconstrained(LocalChatLLM):
    """The same model, its replies generated without a grammar (as before it)."""

    def _stream(self, messages: list[Message], schema: Any, max_tokens: int | None, hang_up: HangUp) -> Any:
        return super()._stream(messages, None, max_tokens, hang_up)


class ShortPrompt(LLM):
    """Sends `llm` the short system prompt instead of the planner's (the task table and demos):
    random weights read neither, and a tiny model's long prefill would only slow the run."""

    def __init__(self, llm: LocalChatLLM) -> None:
        super().__init__(llm.limits)
        self.inner = llm

    def describe(self) -> str:
        return self.inner.describe()

    def _stream(self, messages: list[Message], schema: Any, max_tokens: int | None, hang_up: HangUp) -> Any:
        short = [{"role": "system", "content": SHORT_SYSTEM}, *messages[1:]]
        return self.inner._stream(short, schema, max_tokens, hang_up)


class Side:
    """One side of the comparison: its LLM and what its requests came to."""

    def __init__(self, kind: type[LocalChatLLM], model: str, args: argparse.Namespace) -> None:
        llm: LLM = kind(model, max_new_tokens=args.budget)
        self.llm = ShortPrompt(llm) if args.prompt == "short" else llm  # type: ignore[arg-type]
        self.llm.complete([{"role": "user", "content": "warm up"}], stage="warm")  # loads the model
        self.llm.calls.clear()
        self.cases = self.schema_valid = self.plan_valid = self.corrections = 0
        self.firsts: list[float] = []
        self.seconds = 0.0

    def run(self, case: tuple[str, dict[str, str]], retries: int, shots: int | None) -> None:
        request, files = case
        scanner, first, rejected = TaskScanner(), list[float](), list[Any]()
        started = time.monotonic()

        def on_piece(piece: str) -> None:
            if not first and not rejected and scanner.feed(piece):  # the first reply's first task
                first.append(time.monotonic() - started)

        outcome = make_plan(
            self.llm,
            request,
            files=[FileInfo(kind, name, new=True) for kind, name in files.items()],
            rules=FileRules(uploads=frozenset(files.values())),
            max_retries=retries,
            shots=shots,
            on_piece=on_piece,
            on_rejected=lambda *problems: rejected.append(problems),
            limits=PlanLimits(),
        )
        self.seconds += time.monotonic() - started
        schema = plan_schema(task_types.TASKS.values(), files=files.values())
        self.cases += 1
        self.schema_valid += _fits(schema, outcome.replies[0])
        self.plan_valid += not outcome.problems
        self.corrections += len(outcome.problems)
        self.firsts.extend(first)

    def results(self) -> dict[str, Any]:
        calls = self.llm.calls
        tokens = sum(c.usage.completion_tokens for c in calls)
        return {
            "requests": self.cases,
            "schema_valid": self.schema_valid / self.cases,
            "plan_valid": self.plan_valid / self.cases,
            "corrections": self.corrections / self.cases,
            "tokens_per_s": tokens / max(sum(c.seconds for c in calls), 1e-9),
            "first_task_s": statistics.median(self.firsts) if self.firsts else None,
            "tokens": tokens,
            "seconds": self.seconds,
        }


GRAMMAR_SECONDS = [0.0, 0]  # time in the grammar's logits processor, and its calls (one a token)


def _timed_grammar() -> None:
    """Counts the time generation spends in the grammar (its mask, at each token)."""
    from models_local import grammar

    call = grammar.JsonGrammar.__call__

    def timed(self: Any, input_ids: Any, scores: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(self, input_ids, scores)
        finally:
            GRAMMAR_SECONDS[0] += time.perf_counter() - started
            GRAMMAR_SECONDS[1] += 1

    grammar.JsonGrammar.__call__ = timed  # type: ignore[method-assign]


def _fits(schema: dict[str, Any], reply: str) -> bool:
    try:
        jsonschema.validate(json.loads(reply), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--baseline", type=int, default=5, help="of them, run without the grammar too")
    parser.add_argument("--budget", type=int, default=200, help="max new tokens a reply")
    parser.add_argument("--retries", type=int, default=0, help="correction rounds allowed a plan")
    parser.add_argument("--model", help="a local chat model folder (default: the tests' tiny one)")
    parser.add_argument("--prompt", choices=("short", "full"), default="short")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)  # on a shared 2-core machine one thread is faster and steadier
    _timed_grammar()
    model = args.model or _tiny_model()
    cases = requests(args.requests)
    shots = 0 if args.prompt == "short" else None
    sides = {"grammar": Side(LocalChatLLM, model, args), "none": Side(Unconstrained, model, args)}
    for i, case in enumerate(cases):  # the sides take turns: the machine's load falls on both alike
        sides["grammar"].run(case, args.retries, shots)
        if i < args.baseline:
            sides["none"].run(case, args.retries, shots)
    results = {name: side.results() for name, side in sides.items() if side.cases}
    results["grammar_ms_per_token"] = GRAMMAR_SECONDS[0] / max(GRAMMAR_SECONDS[1], 1) * 1e3  # type: ignore[assignment]
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        _table(results, args)
    return 0


def _tiny_model() -> str:
    from tiny_text_audio import TinyModels

    return TinyModels(Path(tempfile.mkdtemp(prefix="plan-grammar-")))("llama-chat")


def _table(results: dict[str, Any], args: argparse.Namespace) -> None:
    print(f"budget {args.budget} tokens, {args.retries} correction(s) allowed, {args.prompt} prompt")
    print(
        "grammar | requests | schema-valid | plan-valid | corrections/req | tokens/s | first task (s)"
        " | run (s)"
    )
    for side, r in results.items():
        if not isinstance(r, dict):
            continue
        first = f"{r['first_task_s']:.2f}" if r["first_task_s"] is not None else "-"
        print(
            f"{side:7} | {r['requests']:8} | {r['schema_valid']:12.0%} | {r['plan_valid']:10.0%} | "
            f"{r['corrections']:15.2f} | {r['tokens_per_s']:8.1f} | {first:>14} | {r['seconds']:7.1f}"
        )
    if results.get("none"):
        ratio = results["grammar"]["tokens_per_s"] / results["none"]["tokens_per_s"]
        print(
            f"tokens/s with the grammar / without: {ratio:.2f} "
            "(whole calls: prefill and grammar compile included)"
        )
        mask_ms = GRAMMAR_SECONDS[0] / max(GRAMMAR_SECONDS[1], 1) * 1e3
        token_ms = 1e3 / results["none"]["tokens_per_s"]
        print(
            f"the grammar's own time: {mask_ms:.3f} ms a token, {mask_ms / token_ms:.1%} "
            f"of a token without it ({token_ms:.2f} ms)"
        )


if __name__ == "__main__":
    raise SystemExit(main())
