"""Planning against the fake LLM server through the real openai client."""

import json
import time
from pathlib import Path

import pytest
import yaml
from fakes.llm_server import FakeLLMServer, Reply

from hugginggpt import prompts
from hugginggpt.llms.interface import LLMError
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.stages.plan import FileRules, parse_plan, validate_plan
from hugginggpt.stages.planner import FileInfo, make_plan, planning_messages, trim_history

CORPUS = yaml.safe_load((Path(__file__).parent / "data" / "malformed_plans.yaml").read_text())
RULES = FileRules(uploads=frozenset({"a.jpg"}))
VALID = '{"tasks": [{"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": "a.jpg"}}]}'


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        yield s


def llm_for(server, **kwargs):
    return OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="sk-test", timeout=5, **kwargs)


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 25


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_malformed_plan_ends_in_valid_plan_or_clear_error(server, case):
    server.script("plan", case["reply"])
    outcome = make_plan(llm_for(server), "caption a.jpg", rules=RULES, max_retries=2)
    expect = case["expect"]
    if "valid" in expect:
        assert outcome.error is None, outcome.problems
        assert [t.task for t in outcome.plan.tasks] == expect["valid"]
        assert outcome.attempts == 1
    else:
        assert outcome.plan is None
        assert expect["problem"] in outcome.error
        assert outcome.attempts == 3  # the first try and two corrections, then it stops
        # the problems went back to the LLM in the follow-up message
        follow_up = server.requests[1]["messages"][-1]["content"]
        assert expect["problem"] in follow_up


def test_problems_are_sent_back_and_the_corrected_plan_is_used(server):
    server.script(
        "plan", '[{"task": "image-captioning", "id": 0, "dep": [-1], "args": {"image": "a.jpg"}}]', VALID
    )
    rejected = []
    outcome = make_plan(
        llm_for(server), "caption it", rules=RULES, on_rejected=lambda a, p: rejected.append((a, p))
    )
    assert outcome.error is None and outcome.attempts == 2
    assert [t.task for t in outcome.plan.tasks] == ["image-to-text"]
    assert rejected[0][0] == 1 and "did you mean image-to-text" in rejected[0][1][0]
    second = server.requests[1]["messages"]
    assert second[-2]["role"] == "assistant"
    assert "image-captioning" in second[-2]["content"] and "That plan cannot run" in second[-1]["content"]


def test_structured_output_is_requested_then_dropped_once_refused():
    with FakeLLMServer(reject_schema=True) as server:
        server.script("plan", VALID)
        llm = llm_for(server)
        assert make_plan(llm, "caption", rules=RULES).plan is not None
        assert make_plan(llm, "caption", rules=RULES).plan is not None
        formats = [r.get("response_format", {}).get("type") for r in server.requests]
        assert formats == ["json_schema", None, None]  # refused once, remembered after that
        assert "anyOf" in str(server.requests[0]["response_format"])  # the typed schema was offered
        assert [c.json_mode for c in llm.calls] == [False, False]


def test_structured_output_is_sent_when_accepted(server):
    server.script("plan", VALID)
    llm = llm_for(server)
    make_plan(llm, "caption", rules=RULES)
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    shapes = {s["properties"]["task"]["enum"][0]: s for s in schema["properties"]["tasks"]["items"]["anyOf"]}
    caption = shapes["image-to-text"]["properties"]["args"]
    assert caption["required"] == ["image"] and caption["additionalProperties"] is False
    assert {"enum": ["a.jpg"], "type": "string"} in caption["properties"]["image"][
        "anyOf"
    ]  # this chat's files
    assert llm.calls[0].json_mode and llm.calls[0].usage.completion_tokens > 0


def test_rate_limit_is_retried_by_the_client(server):
    server.script("plan", Reply(status=429), VALID)
    outcome = make_plan(llm_for(server, max_retries=2), "caption", rules=RULES)
    assert outcome.plan is not None and len(server.requests) == 2


@pytest.mark.parametrize("status, words", [(500, "HTTP 500"), (429, "rate limiting"), (401, "API key")])
def test_backend_errors_name_the_endpoint_and_cause_without_the_key(server, status, words):
    server.script("plan", Reply("boom", status=status))
    with pytest.raises(LLMError) as info:
        make_plan(llm_for(server, max_retries=1), "caption", rules=RULES)
    message = str(info.value)
    assert words in message and server.url in message and "sk-test" not in message


def test_timeout_is_a_clear_error(server):
    server.script("plan", Reply(VALID, delay=2))
    llm = OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="x", timeout=0.5, max_retries=0)
    with pytest.raises(LLMError, match="did not answer in time"):
        make_plan(llm, "caption", rules=RULES)


def test_unreachable_server_is_a_clear_error():
    llm = OpenAICompatibleLLM(
        base_url="http://127.0.0.1:9/v1", model="m", api_key="x", timeout=2, max_retries=0
    )
    with pytest.raises(LLMError, match="could not be reached"):
        make_plan(llm, "hi", rules=RULES)


def test_demos_are_valid_and_cover_the_required_shapes():
    demos = prompts.demos()
    assert len(demos) >= 6
    shapes = set()
    for demo in demos:
        plan = parse_plan(str({"tasks": demo["plan"]}))
        uploads = frozenset((demo["files"] or {}).values())
        assert validate_plan(plan, FileRules(uploads=uploads)) == [], demo["request"]
        if not plan.tasks:
            shapes.add("empty")
        elif len(plan.tasks) == 1:
            shapes.add("single")
        elif (
            all(len(t.dep) <= 1 for t in plan.tasks)
            and len({d for t in plan.tasks for d in t.dep}) == len(plan) - 1
        ):
            shapes.add("chain")
        else:
            shapes.add("dag")
        if any(len(t.references()) >= 2 or len(t.dep) >= 2 for t in plan.tasks):
            shapes.add("two inputs")
        shapes.update(k for k in (demo["files"] or {}))
    assert {"empty", "single", "chain", "dag", "two inputs", "image", "audio"} <= shapes


def test_prompt_lists_every_task_type_and_the_files():
    from hugginggpt.tasks import TASKS

    messages = planning_messages("x", files=[FileInfo("audio", "talk.wav", new=True)], shots=2)
    system = messages[0]["content"]
    assert all(f"- {name}:" in system for name in TASKS)
    assert len(messages) == 1 + 4 + 1
    assert "audio: talk.wav (attached to this message)" in messages[-1]["content"]


def test_history_is_trimmed_to_budget_newest_kept():
    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "x" * 400}
        for i in range(20)
    ]
    kept = trim_history(history, budget_tokens=500)
    assert kept and kept[-1]["content"].startswith("message 19")
    assert sum(len(m["content"]) for m in kept) // 4 <= 500
    assert len(kept) < len(history)


def test_reference_spellings_keep_the_text_around_them():
    from hugginggpt.stages.plan import normalize_references

    assert normalize_references("about <resource>-7 and <resource-2> or <GENERATED>-3, x") == (
        "about <resource>-7 and <resource>-2 or <resource>-3, x"
    )


def test_a_bad_request_on_plain_text_is_an_llm_error_and_does_not_mark_schema_unsupported(server):
    server.script("plan", Reply("context too long", status=400))
    llm = llm_for(server)
    with pytest.raises(LLMError, match="HTTP 400: .*context too long"):
        make_plan(llm, "caption", rules=RULES)
    assert "json_schema" not in llm._learnt  # both tries failed: nothing learnt about the schema


def test_prompt_says_what_each_argument_is_for_when_the_name_does_not():
    system = planning_messages("x", shots=0)[0]["content"]
    qa = next(line for line in system.splitlines() if line.startswith("- question-answering:"))
    assert "the question" in qa and "the text holding the answer" in qa
    vqa = next(line for line in system.splitlines() if line.startswith("- visual-question-answering:"))
    assert "the question" in vqa


@pytest.mark.parametrize(
    "reply, problem",
    [
        ("[" * 10_000, "nests brackets"),
        ('{"tasks": ' + "[" * 5000 + "]" * 5000 + "}", "nests brackets"),
        ("[" * 150_000, "characters long"),
        (
            json.dumps(
                [{"task": "summarization", "id": i, "dep": [-1], "args": {"text": "x"}} for i in range(500)]
            ),
            "at most 30",
        ),
    ],
    ids=["10k-nested", "5k-nested-in-tasks", "150k-chars", "500-tasks"],
)
def test_hostile_plans_are_refused_quickly_and_not_echoed_in_full(server, reply, problem):
    server.script("plan", reply)
    started = time.perf_counter()
    outcome = make_plan(llm_for(server), "caption a.jpg", rules=RULES, max_retries=1)
    assert outcome.plan is None and problem in outcome.error
    assert time.perf_counter() - started < 30  # bounded; bench/hostile_input.py has the numbers
    correction = server.requests[1]["messages"]
    assert len(correction[-2]["content"]) < 5000  # the rejected reply is not sent back whole
    assert len(correction[-1]["content"]) < 10_000


def test_a_task_listing_fifteen_thousand_dependencies_is_rejected_in_linear_time(server):
    reply = json.dumps(
        [{"task": "summarization", "id": 0, "dep": list(range(1, 15_001)), "args": {"text": "x"}}]
    )
    server.script("plan", reply)
    started = time.perf_counter()
    outcome = make_plan(llm_for(server), "summarize", rules=RULES, max_retries=0)
    assert outcome.plan is None and "not in the plan" in outcome.error
    assert time.perf_counter() - started < 30  # bounded; bench/hostile_input.py has the numbers
    assert len(outcome.problems[0]) <= 21  # at most 20 problems and a line saying how many more
