"""The person in control of the plan, through the Pipeline API the UI uses: plan only, run a given
plan, edit a finished run and run again (only what changed), and the LLM calls each one makes."""

from __future__ import annotations

import json

import pytest
from fakes.endpoints import FakeEndpoint, cards
from fakes.llm_server import FakeLLMServer

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.run.cache import ResultCache
from hugginggpt.run.events import ErrorKind, ModelSelected, Outcome, PickSource, TaskFinished
from hugginggpt.run.pipeline import Pipeline
from hugginggpt.stages.plan import Plan, Task
from hugginggpt.stages.planfile import Edit, PlanFileError, apply_edits, given_plan, problems_by_task, to_json

CATALOG = Catalog(
    cards(
        ("cap-a", "image-to-text", 20),
        ("cap-b", "image-to-text", 10),
        ("draw", "text-to-image", 10),
        ("label", "image-classification", 10),
        ("speak", "text-to-speech", 10),
    )
)
# 0 -> 1 -> 2, and 3 on its own
PLAN = [
    {"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": "photo.png"}},
    {"task": "text-to-image", "id": 1, "dep": [0], "args": {"text": "<resource>-0"}},
    {"task": "image-classification", "id": 2, "dep": [1], "args": {"image": "<resource>-1"}},
    {"task": "text-to-speech", "id": 3, "dep": [-1], "args": {"text": "hello"}},
]


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        s.script("plan", json.dumps(PLAN))
        s.script("select", '{"0": {"id": "cap-b", "reason": "shorter captions"}}')
        s.script("respond", "The answer.")
        yield s


@pytest.fixture
def ws(tmp_path):
    (tmp_path / "photo.png").write_bytes(b"\x89PNG photo")
    workspace = Workspace(tmp_path / "conv")
    workspace.add_upload(tmp_path / "photo.png")
    return workspace


def pipeline(server, endpoint, tmp_path, **settings):
    llm = OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="sk-x", timeout=5, max_retries=0)
    cache = ResultCache(tmp_path / "cache", 10**7)
    return Pipeline(llm=llm, catalog=CATALOG, endpoint=endpoint, settings=Settings(**settings), cache=cache)


def last(events):
    events = list(events)
    return events, events[-1]


def test_plan_only_plans_and_selects_and_runs_nothing(server, ws, tmp_path):
    endpoint = FakeEndpoint()
    events, done = last(pipeline(server, endpoint, tmp_path).plan_only("caption, draw, speak", workspace=ws))
    assert done.outcome is Outcome.PLANNED and done.ok and done.error is None
    assert server.stages() == ["plan", "select"] and endpoint.calls == [] and done.records == ()
    assert [t.id for t in done.plan.tasks] == [0, 1, 2, 3]
    assert done.choices[0].model.id == "cap-b" and done.choices[0].reason == "shorter captions"
    assert done.choices[1].seed is not None and done.choices[0].seed is None  # only sampling tasks
    assert done.trace["outcome"] == "planned" and done.trace_file.is_file()
    # the same JSON that --plan-only prints and --plan FILE reads
    again = given_plan(json.loads(json.dumps(to_json(done.plan, done.choices))), CATALOG)
    assert again.plan.to_json() == done.plan.to_json()
    assert {i: c.model.id for i, c in again.choices.items()} == {
        0: "cap-b",
        1: "draw",
        2: "label",
        3: "speak",
    }
    assert again.seeds[1] == done.choices[1].seed


def test_a_given_plan_with_every_model_makes_only_the_answer_call(server, ws, tmp_path):
    endpoint = FakeEndpoint()
    given = given_plan(
        {
            "plan": PLAN,
            "choices": {str(i): {"model": m} for i, m in enumerate(["cap-a", "draw", "label", "speak"])},
        },
        CATALOG,
    )
    p = pipeline(server, endpoint, tmp_path)
    events, done = last(p.run_plan("go", given.plan, given.choices, workspace=ws))
    assert done.outcome is Outcome.ANSWERED and server.stages() == ["respond"]
    assert [r.model for r in done.records] == ["cap-a", "draw", "label", "speak"]
    assert {e.source for e in events if isinstance(e, ModelSelected)} == {PickSource.GIVEN}
    assert done.trace["plan_given"] is True and "plan_attempts" not in done.trace


def test_a_given_plan_asks_the_llm_only_about_tasks_without_a_model(server, ws, tmp_path):
    given = given_plan({"plan": PLAN, "choices": {"1": {"model": "draw", "seed": 5}}}, CATALOG)
    _, done = last(
        pipeline(server, FakeEndpoint(), tmp_path).run_plan("go", given.plan, given.choices, workspace=ws)
    )
    assert server.stages() == ["select", "respond"]
    asked = server.requests[0]["messages"][-1]["content"]
    assert "cap-a" in asked and "draw" not in asked  # only task 0 had a choice to make
    assert done.records[1].seed == 5 and done.records[0].model == "cap-b"


def test_a_given_plan_goes_through_the_validator(server, ws, tmp_path):
    bad = Plan([Task(0, "image-to-text", [], {"image": "nowhere.png"})])
    _, done = last(pipeline(server, FakeEndpoint(), tmp_path).run_plan("go", bad, workspace=ws))
    assert done.outcome is Outcome.FAILED and done.error_kind is ErrorKind.INPUT
    assert "nowhere.png" in done.error and server.requests == []


def test_an_edited_argument_reruns_exactly_that_task_and_its_dependants(server, ws, tmp_path):
    endpoint = FakeEndpoint()
    p = pipeline(server, endpoint, tmp_path)
    _, first = last(p.run("caption, draw, speak", workspace=ws))
    assert first.ok and len(endpoint.calls) == 4
    server.reset()
    server.script("respond", "A new answer.")
    endpoint.calls.clear()
    events, done = last(p.rerun(first, {1: Edit(args={"text": "a blue <resource>-0"})}, workspace=ws))
    assert done.ok and done.answer == "A new answer." and server.stages() == ["respond"]
    assert sorted(call[0] for call in endpoint.calls) == ["image-classification", "text-to-image"]
    assert [r.cached for r in done.records] == [True, False, False, True]
    assert done.plan.by_id()[1].args["text"] == "a blue <resource>-0"
    assert done.records[1].seed == first.records[1].seed  # a new prompt, the same seed
    assert done.trace["rerun_of"] == first.trace["request_id"]
    # the answer is written from the new records: the new image, not the first one
    new_image = ws.relative(done.records[1].outputs[0].path)
    assert new_image.startswith(f"outputs/{done.trace['request_id']}/")
    assert new_image in server.requests[-1]["messages"][-1]["content"]


def test_regenerate_with_a_new_seed_and_pick_another_model(server, ws, tmp_path):
    endpoint = FakeEndpoint()
    p = pipeline(server, endpoint, tmp_path)
    _, first = last(p.run("caption, draw, speak", workspace=ws))
    endpoint.calls.clear()
    _, done = last(p.rerun(first, {3: Edit(seed=first.records[3].seed + 1)}, workspace=ws))
    assert [call[0] for call in endpoint.calls] == ["text-to-speech"] and done.records[
        3
    ].seed == first.records[3].seed + 1
    endpoint.calls.clear()
    events, done = last(p.rerun(done, {0: Edit(model="cap-a")}, workspace=ws))
    assert [call[1] for call in endpoint.calls] == ["cap-a", "draw", "label"]
    assert (
        next(e for e in events if isinstance(e, ModelSelected) and e.task_id == 0).source is PickSource.GIVEN
    )


def test_a_task_that_fell_back_is_rerun_with_the_model_that_worked(server, ws, tmp_path):
    endpoint = FakeEndpoint(failing={"cap-b"})
    p = pipeline(server, endpoint, tmp_path)
    _, first = last(p.run("caption, draw, speak", workspace=ws))
    assert first.records[0].model == "cap-a"
    endpoint.calls.clear()
    _, done = last(p.rerun(first, {3: Edit(args={"text": "bye"})}, workspace=ws))
    assert [call[1] for call in endpoint.calls] == ["speak"]  # cap-b is not tried again


def test_bad_edits_are_clear_errors(server, ws, tmp_path):
    p = pipeline(server, FakeEndpoint(), tmp_path)
    _, first = last(p.run("caption, draw, speak", workspace=ws))
    _, done = last(p.rerun(first, {9: Edit(args={"text": "x"})}, workspace=ws))
    assert done.outcome is Outcome.FAILED and "no task 9" in done.error
    _, done = last(p.rerun(first, {0: Edit(delete=True)}, workspace=ws))  # task 1 needs its output
    assert done.error_kind is ErrorKind.INPUT and "task 1" in done.error
    with pytest.raises(PlanFileError, match="seed"):
        apply_edits(first.plan, first.choices, {1: Edit(seed=-1)}, CATALOG)


def test_problems_are_grouped_by_task_for_a_form(server, ws, tmp_path):
    p = pipeline(server, FakeEndpoint(), tmp_path)
    plan = Plan([Task(0, "image-to-text", [], {"image": "nowhere.png"}), Task(1, "text-to-image", [0], {})])
    grouped = problems_by_task(p.check_plan(plan, ws))
    assert set(grouped) == {0, 1} and "nowhere.png" in grouped[0][0] and "text" in grouped[1][0]
    assert p.check_plan(given_plan(PLAN, CATALOG).plan, ws) == []


def test_plan_files_with_bad_choices_are_refused_with_the_reason():
    for raw, words in (
        ({"plan": PLAN, "choices": {"7": {"model": "x"}}}, "task '7'"),
        ({"plan": PLAN, "choices": {"0": {"model": 5}}}, "model"),
        ({"plan": PLAN, "choices": {"1": {"seed": "lucky"}}}, "seed"),
        ({"tasks": PLAN}, '"plan"'),
    ):
        with pytest.raises(PlanFileError, match=words):
            given_plan(raw, CATALOG)
    # a model the catalog does not list is used as named
    assert (
        given_plan({"plan": PLAN, "choices": {"0": "me/my-captioner"}}, CATALOG).choices[0].model.id
        == "me/my-captioner"
    )


def test_finished_events_say_cached(server, ws, tmp_path):
    p = pipeline(server, FakeEndpoint(), tmp_path)
    last(p.run("caption, draw, speak", workspace=ws))
    events, _ = last(p.run("caption, draw, speak", workspace=ws))
    assert [e.cached for e in events if isinstance(e, TaskFinished)] == [True] * 4


def test_done_carries_its_request_id_usage_and_timings(server, ws, tmp_path):
    """What the doors read of a finished run is on Done itself, not in its trace's dict."""
    _, done = last(pipeline(server, FakeEndpoint(), tmp_path).run("caption photo.png", workspace=ws))
    assert done.outcome is Outcome.ANSWERED and done.request == "caption photo.png"
    assert done.request_id and done.trace_file == ws.trace_path(done.request_id)
    tokens = done.trace["tokens"]
    usage = done.usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (tokens["prompt"], tokens["completion"])
    assert done.usage.total_tokens == tokens["prompt"] + tokens["completion"] > 0
    assert set(done.timings) >= {"plan", "select", "execute", "respond", "total"}
    assert done.timings["total"] >= done.timings["execute"] > 0
