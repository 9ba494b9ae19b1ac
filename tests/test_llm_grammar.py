"""The in-process LLM under a grammar of the reply's schema (models_local/grammar.py), on tiny models.

Random weights write noise; under the grammar that noise is JSON of the schema, every time. A
"flat" model (all logits equal, a few tokens favoured through its generation config) writes the
same plan every time, for tests that need a task to be valid on its own.
"""

import json
import threading
import time
from pathlib import Path

import jsonschema
import pytest
from tiny_text_audio import TinyModels, llama_chat

from hugginggpt import tasks as task_types
from hugginggpt.llms.interface import LLMLimits
from hugginggpt.llms.local import LocalChatLLM
from hugginggpt.stages.plan import FileRules, PlanLimits, parse_plan
from hugginggpt.stages.plan_schema import plan_schema, selection_schema
from hugginggpt.stages.plan_stream import TaskScanner, read_task
from hugginggpt.stages.planner import make_plan

MESSAGES = [{"role": "system", "content": "plan"}, {"role": "user", "content": "caption 0.jpg"}]
PLAN_SCHEMA = plan_schema(task_types.TASKS.values(), files=["0.jpg", "clip.wav"])


def flat_chat(folder: Path) -> None:
    """A chat model whose logits are all equal, but for a few tokens favoured in its generation
    config: `{` (open a task), `,` (write another), `-` and `1` (dep [-1] and id 1)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    llama_chat(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        model.lm_head.weight.zero_()
    model.save_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    config = GenerationConfig.from_pretrained(folder)
    favoured = (("{", 4.0), (",", 3.0), ("-", 2.0), ("1", 1.0))
    config.sequence_bias = [[[tok.convert_tokens_to_ids(c)], bias] for c, bias in favoured]
    config.save_pretrained(folder)


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    return TinyModels(tmp_path_factory.mktemp("grammar"), {"llama-chat": llama_chat, "flat-chat": flat_chat})


def valid(schema, text):
    jsonschema.validate(json.loads(text), schema)
    return True


@pytest.mark.parametrize("budget", [1, 40, 190, 400])
def test_random_weights_write_json_of_the_schema_closed_within_the_budget(models, budget):
    llm = LocalChatLLM(models("llama-chat"), max_new_tokens=budget)
    plan = llm.complete(MESSAGES, stage="plan", schema=PLAN_SCHEMA)
    assert plan.json_mode and plan.cut is None
    assert plan.usage.completion_tokens <= max(budget, 20)  # at least room for {"tasks": []}
    assert valid(PLAN_SCHEMA, plan.text)
    choice_schema = selection_schema({0: ["org/a", "org/b"], 3: ["org/c", "org/d"]})
    choice = llm.complete(MESSAGES, stage="select", schema=choice_schema)
    assert choice.json_mode and valid(choice_schema, choice.text)


def test_without_the_grammar_the_same_weights_write_noise_and_the_answer_stays_free(models):
    llm = LocalChatLLM(models("llama-chat"), max_new_tokens=60)
    answer = llm.complete(MESSAGES, stage="respond")
    assert not answer.json_mode
    with pytest.raises(ValueError):
        json.loads(answer.text)


def test_a_constrained_plan_streams_and_its_first_task_can_start_before_it_ends(models):
    llm = LocalChatLLM(models("flat-chat"), max_new_tokens=300)
    schema = plan_schema([task_types.TASKS["image-to-text"]], files=["0.jpg"], max_tasks=3)
    rules, scanner = FileRules(uploads=frozenset({"0.jpg"})), TaskScanner()
    pieces, startable, at = [], [], None
    for piece in llm.stream(MESSAGES, stage="plan", schema=schema):
        pieces.append(piece)
        for raw in scanner.feed(piece):  # what streaming_run does with each piece
            task = read_task(raw, len(startable), startable, rules)
            if task is not None:
                startable.append(task)
                at = at or len(pieces)
    reply = "".join(pieces)
    assert valid(schema, reply) and len(pieces) > 20  # word by word (the streamer's pieces), not whole
    # Task 1 could start with two thirds of the reply to come; the second task (id 1 again) waits
    # for the whole plan, the third (written as the budget closed the JSON: id 0) can start too.
    assert [t.id for t in startable] == [1, 0] and at < len(pieces) / 2
    assert [t.task for t in parse_plan(reply).tasks] == ["image-to-text"] * 3


def test_the_planner_takes_a_constrained_plan_and_corrects_what_the_grammar_cannot_say(models):
    # The flat model gives every task id 1: the grammar allows it, the validator does not.
    llm = LocalChatLLM(models("flat-chat"), max_new_tokens=300)
    outcome = make_plan(
        llm,
        "caption it",
        rules=FileRules(uploads=frozenset({"0.jpg"})),
        limits=PlanLimits(max_tasks=3),
        specs=[task_types.TASKS["image-to-text"]],
        max_retries=1,
    )
    assert outcome.attempts == 2 and outcome.plan is None
    assert all("id 1" in p[0] for p in outcome.problems)  # parsed and read: only the ids were wrong
    assert [c.json_mode for c in llm.calls] == [True, True]


def test_stop_ends_constrained_generation_at_the_next_token(models):
    stop = threading.Event()
    llm = LocalChatLLM(models("llama-chat"), max_new_tokens=5000).recording(stop)
    llm.limits = LLMLimits(max_seconds=60)
    stream = llm.stream(MESSAGES, stage="plan", schema=PLAN_SCHEMA)
    first = next(stream)
    stop.set()
    started = time.monotonic()
    rest = list(stream)
    assert time.monotonic() - started < 5
    assert llm.calls[0].cut == "the run was stopped" and first and len(rest) < 50
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(t.name == "local-llm-generate" for t in threading.enumerate()):
        time.sleep(0.05)
    assert not any(t.name == "local-llm-generate" for t in threading.enumerate())
