"""The typed schemas of the plan and the model choice (hugginggpt/stages/plan_schema.py)."""

import ast
import json
from pathlib import Path

import jsonschema
import pytest
from fakes.llm_server import FakeLLMServer

from hugginggpt import prompts
from hugginggpt import tasks as task_types
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.stages.plan import FileRules, PlanParseError, parse_plan
from hugginggpt.stages.plan_schema import plan_schema, selection_schema
from hugginggpt.stages.planner import make_plan, validate_unchecked_files
from hugginggpt.tasks import Arg, TaskSpec

ROOT = Path(__file__).resolve().parent.parent
TASKS = task_types.TASKS.values()


def accepts(schema, value) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def test_every_few_shot_demo_fits_the_schema_of_its_files():
    for demo in prompts.demos():
        files = (demo["files"] or {}).values()
        assert accepts(plan_schema(TASKS, files=files), {"tasks": demo["plan"]}), demo["request"]
        if demo["plan"] and files:  # the same plan in a conversation without those files: refused
            assert not accepts(plan_schema(TASKS, files=["other.png"]), {"tasks": demo["plan"]})


def _literals(path: Path):
    """Every dict or list written as a literal in a Python file (its values literals too)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Dict | ast.List):
            try:
                yield ast.literal_eval(node)
            except (ValueError, SyntaxError, TypeError):
                continue


def _plans_in_tests_and_bench():
    """The plans the suite and the benchmarks write (lists of task objects, or a lone task object)
    that parse and validate: what a server's reply may be. Those with a `dep` on every task as
    written; the others as the parser reads them (the lenient path fills in a missing dep)."""
    for path in sorted([*ROOT.glob("tests/*.py"), *ROOT.glob("bench/*.py")]):
        if path.name == Path(__file__).name:
            continue  # this file's plans are written for the schema to refuse
        for value in _literals(path):
            items = value if isinstance(value, list) else [value]
            if not items or not all(isinstance(t, dict) and "task" in t for t in items):
                continue
            try:
                plan = parse_plan(json.dumps({"tasks": items}))
            except (PlanParseError, TypeError):
                continue
            if validate_unchecked_files(plan):
                continue  # written to be refused
            written = all(set(t) == {"task", "id", "dep", "args"} for t in items)
            yield path.name, {"tasks": items if written else plan.to_json()}


def test_every_valid_plan_in_tests_and_bench_fits_the_schema():
    schema = plan_schema(TASKS, files=None, allow_urls=True)
    plans = list(_plans_in_tests_and_bench())
    assert len(plans) >= 30  # the collector finds them (it would pass vacuously otherwise)
    refused = [(name, plan) for name, plan in plans if not accepts(schema, plan)]
    assert refused == []


@pytest.mark.parametrize(
    "task, why",
    [
        ({"task": "image-to-text", "id": 0, "dep": [-1], "args": {"picture": "a.jpg"}}, "unknown argument"),
        ({"task": "image-to-text", "id": 0, "dep": [-1], "args": {}}, "required argument missing"),
        ({"task": "image-captioning", "id": 0, "dep": [-1], "args": {"image": "a.jpg"}}, "unknown task"),
        ({"task": "image-to-text", "id": "0", "dep": [-1], "args": {"image": "a.jpg"}}, "id not an integer"),
        ({"task": "image-to-text", "id": 0, "dep": ["0"], "args": {"image": "a.jpg"}}, "dep of strings"),
        ({"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": "b.jpg"}}, "a file not here"),
        ({"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": "<resource>-x"}}, "bad reference"),
        ({"task": "image-to-text", "id": 0, "dep": [-1]}, "no args"),
    ],
)
def test_the_schema_refuses_what_the_task_types_do_not_allow(task, why):
    schema = plan_schema(TASKS, files=["a.jpg"])
    assert accepts(
        schema, {"tasks": [{"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": "a.jpg"}}]}
    )
    assert not accepts(schema, {"tasks": [task]}), why


def test_text_arguments_take_any_text_and_media_arguments_references():
    schema = plan_schema(TASKS, files=["a.jpg"])
    plan = [
        {"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": "a.jpg"}},
        {"task": "text-to-image", "id": 1, "dep": [0], "args": {"text": 'draw "<resource>-0", big'}},
        {"task": "image-to-image", "id": 2, "dep": [1], "args": {"image": "<resource>-1"}},
    ]
    assert accepts(schema, {"tasks": plan})
    assert not accepts(plan_schema(TASKS, files=["a.jpg"], max_tasks=2), {"tasks": plan})
    url_task = {"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": "https://x.org/a.png"}}
    assert not accepts(schema, {"tasks": [url_task]})
    assert accepts(plan_schema(TASKS, files=["a.jpg"], allow_urls=True), {"tasks": [url_task]})


SKETCH = TaskSpec(
    "sketch-to-3d",
    (Arg("image", "image"), Arg("style", "text", required=False, help="how it should look")),
    ("image",),
    "a Gradio Space that turns a sketch into a 3D render",
)


def test_a_task_type_a_tool_adds_is_in_the_schema_with_no_code_change(monkeypatch):
    plan = {"tasks": [{"task": "sketch-to-3d", "id": 0, "dep": [-1], "args": {"image": "a.jpg"}}]}
    assert not accepts(plan_schema(TASKS, files=["a.jpg"]), plan)
    assert accepts(plan_schema([*TASKS, SKETCH], files=["a.jpg"]), plan)
    # Added to the registry at run time (as tools are): the planner's next schema has it.
    monkeypatch.setitem(task_types.TASKS, SKETCH.name, SKETCH)
    styled = {**plan["tasks"][0], "args": {"image": "a.jpg", "style": "clay"}}
    with FakeLLMServer() as server:
        server.script("plan", json.dumps({"tasks": [styled]}))
        llm = OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="x", timeout=5)
        outcome = make_plan(llm, "make it 3D", rules=FileRules(uploads=frozenset({"a.jpg"})))
    sent = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert outcome.plan is not None and outcome.plan.tasks[0].task == "sketch-to-3d"
    assert accepts(sent, plan)
    assert "sketch-to-3d" in server.requests[0]["messages"][0]["content"]  # offered in the prompt too


def test_the_selection_schema_names_this_plans_tasks_and_their_candidates():
    schema = selection_schema({0: ["org/a", "org/b"], 2: ["org/c", "org/d"]})
    good = {"0": {"id": "org/b", "reason": "smaller"}, "2": {"id": "org/c", "reason": "fits"}}
    assert accepts(schema, good)
    assert not accepts(schema, {**good, "2": {"id": "org/a", "reason": "not its candidate"}})
    assert not accepts(schema, {"0": good["0"]})  # a task left out
    assert not accepts(schema, {**good, "1": good["0"]})  # a task not in the plan


def test_model_selection_sends_the_typed_choice_schema_and_reads_the_pick():
    from fakes.endpoints import cards

    from hugginggpt.catalog import Catalog
    from hugginggpt.stages.plan import Plan, Task
    from hugginggpt.stages.selection import select_steps

    catalog = Catalog(cards(("det-big", "object-detection", 900), ("det-small", "object-detection", 500)))
    plan = Plan([Task(0, "object-detection", [], {"image": "a.jpg"})])
    with FakeLLMServer() as server:
        server.script("select", '{"0": {"id": "det-small", "reason": "smaller"}}')
        llm = OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="x", timeout=5)
        steps = select_steps(llm, plan, catalog, "find the objects")
        picked = list(steps)
    sent = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert sent["required"] == ["0"] and sent["properties"]["0"]["properties"]["id"]["enum"] == [
        "det-big",
        "det-small",
    ]
    assert [e.model for e in picked] == ["det-small"]
