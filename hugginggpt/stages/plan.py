"""Plans: the DAG of tasks the LLM proposes. Parsed leniently, validated strictly.

A plan is a JSON list of `{"task": <type>, "id": <int>, "dep": [<ids>], "args": {<name>: <value>}}`.
`<resource>-N` in an argument stands for the output of task N.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from typing import Any

import json_repair

from hugginggpt import tasks as task_types
from hugginggpt.llms.jsontext import first_json_value

RESOURCE = "<resource>-{}"
# The spellings LLMs use for "the output of task N": <resource>-N, <resource-N>, <GENERATED>-N, ...
_REFERENCE = re.compile(r"<\s*(?:resource|generated)\s*>?\s*-\s*(\d+)(?:\s*>)?", re.IGNORECASE)
_EXACT_REFERENCE = re.compile(r"^<resource>-(\d+)$")
RESOURCE_REF = re.compile(r"<resource>-(\d+)")  # a reference anywhere in a value


class PlanParseError(ValueError):
    """The reply holds no JSON that reads as a list of tasks."""


@dataclass
class Task:
    id: int
    task: str
    dep: list[int] = field(default_factory=list)
    args: dict[str, str] = field(default_factory=dict)

    def references(self) -> dict[str, list[int]]:
        """Argument name -> ids of the tasks whose outputs it uses."""
        return {
            name: [int(n) for n in RESOURCE_REF.findall(value)]
            for name, value in self.args.items()
            if "<resource>-" in value
        }

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "id": self.id, "dep": self.dep or [-1], "args": dict(self.args)}


@dataclass
class Plan:
    tasks: list[Task]
    repairs: list[str] = field(default_factory=list)  # what parsing changed, for the trace

    def __len__(self) -> int:
        return len(self.tasks)

    def by_id(self) -> dict[int, Task]:
        return {t.id: t for t in self.tasks}

    def to_json(self) -> list[dict[str, Any]]:
        return [t.to_json() for t in self.tasks]


# ---------------------------------------------------------------- lenient parsing


@dataclass(frozen=True)
class PlanLimits:
    """Bounds on what the LLM's plan may cost to read and to run."""

    max_chars: int = 100_000  # of the reply
    max_depth: int = 32  # nesting of brackets: a plan needs about 4
    max_tasks: int = 30


def parse_plan(reply: str, limits: PlanLimits = PlanLimits()) -> Plan:
    """Read a plan out of an LLM reply, forgiving the usual ways LLMs mangle JSON.

    Raises PlanParseError for a reply over the limits before reading it (work and memory stay
    bounded however the reply is made)."""
    if len(reply) > limits.max_chars:
        raise PlanParseError(
            f"the reply is {len(reply):,} characters long; a plan must fit in {limits.max_chars:,}"
        )
    depth = nesting_depth(reply)
    if depth > limits.max_depth:
        raise PlanParseError(
            f"the reply nests brackets {depth} deep; a plan needs at most {limits.max_depth}"
        )
    data = _load_json(reply)
    if isinstance(data, dict):
        data = next((data[k] for k in ("tasks", "plan", "steps") if isinstance(data.get(k), list)), [data])
    if not isinstance(data, list):
        raise PlanParseError("the reply is not a JSON list of tasks")
    if data == [{}]:
        data = []
    if len(data) > limits.max_tasks:
        raise PlanParseError(f"the plan has {len(data)} tasks; at most {limits.max_tasks} are allowed")
    plan_tasks = []
    for index, raw in enumerate(data):
        if not isinstance(raw, dict):
            raise PlanParseError(f"item {index} of the plan is not an object with task, id, dep and args")
        plan_tasks.append(_task_from_raw(raw, index))
    return Plan(plan_tasks, _add_implied_deps(plan_tasks))


def nesting_depth(text: str) -> int:
    """How deep brackets nest in `text`, strings included (a cheap, linear upper bound)."""
    depth = deepest = 0
    for char in text:
        if char in "[{(":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]})":
            depth = max(0, depth - 1)
    return deepest


def _add_implied_deps(plan_tasks: list[Task]) -> list[str]:
    """A task that uses <resource>-N depends on task N, whatever its `dep` says: add what is missing."""
    ids = {t.id for t in plan_tasks}
    repairs = []
    for t in plan_tasks:
        missing = _implied_deps(t, ids)
        if missing:
            t.dep.extend(missing)
            repairs.append(f"task {t.id}: added dependency on {', '.join(map(str, missing))}, which it uses")
    return repairs


def _implied_deps(task: Task, ids: set[int]) -> list[int]:
    implied = {n for refs in task.references().values() for n in refs} & ids
    return sorted(implied - set(task.dep) - {task.id})


def task_from_raw(raw: dict[str, Any], index: int, *, known: set[int]) -> Task:
    """One task object as parse_plan reads it (item `index` of the list), for a plan still being
    written: references to the `known` tasks add the dependencies they imply."""
    task = _task_from_raw(raw, index)
    task.dep.extend(_implied_deps(task, known))
    return task


def _load_json(reply: str) -> Any:
    text = re.sub(r"```(?:json|python)?", "", reply).strip()
    found = first_json_value(text, _reads_as_plan)
    if found is not None:
        return found
    starts = [i for i in (text.find("["), text.find("{")) if i >= 0]
    if not starts:
        raise PlanParseError("the reply holds no JSON list of tasks")
    text = text[min(starts) : max(text.rfind("]"), text.rfind("}")) + 1]
    try:
        return ast.literal_eval(text)  # Python literals: single quotes, True/None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    data = json_repair.loads(text)
    if data in ("", None):
        raise PlanParseError("the reply holds no JSON list of tasks")
    return data


def _reads_as_plan(value: Any) -> bool:
    # Not a lone {"task": ...}: that may be the first item of a list with a flaw further on.
    if isinstance(value, dict):
        return any(isinstance(value.get(k), list) for k in ("tasks", "plan", "steps"))
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and "task" in v for v in value)


def _task_from_raw(raw: dict[str, Any], index: int) -> Task:
    name = str(raw.get("task", "")).strip().lower().replace("_", "-").replace(" ", "-")
    task_id = _as_int(raw.get("id", index))
    if task_id is None:
        raise PlanParseError(f"item {index} has an id that is not a number: {raw.get('id')!r}")
    return Task(
        id=task_id, task=name, dep=_parse_dep(raw.get("dep")), args=_parse_args(raw.get("args"), name)
    )


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = _REFERENCE.search(value) or re.fullmatch(r"\s*(-?\d+)\s*", value)
        return int(match.group(1)) if match else None
    return None


def _parse_dep(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, str) and "," in value:
        value = value.strip("[]").split(",")
    items = value if isinstance(value, list | tuple) else [value]
    deps: dict[int, None] = {}  # ordered and without repeats, in linear time
    for item in items:
        n = _as_int(item)
        if n is not None and n >= 0:
            deps[n] = None
    return list(deps)


def _parse_args(value: Any, task: str) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, list | tuple):
        spec = task_types.get(task)
        names = [a.name for a in spec.args] if spec else [f"arg{i}" for i in range(len(value))]
        value = dict(zip(names, value, strict=False))
    if not isinstance(value, dict):
        value = {"text": value}
    return {str(k).strip(): normalize_references(_as_text(v)) for k, v in value.items() if v is not None}


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def normalize_references(value: str) -> str:
    return _REFERENCE.sub(lambda m: RESOURCE.format(m.group(1)), value)


# ---------------------------------------------------------------- strict validation


@dataclass(frozen=True)
class FileRules:
    """Which literal file arguments a plan may use."""

    uploads: frozenset[str] = frozenset()  # file names the user uploaded in this conversation
    allow_urls: bool = False


def validate_plan(plan: Plan, rules: FileRules = FileRules()) -> list[str]:
    """Every problem with the plan, worded for the LLM to fix. Empty when the plan is valid."""
    problems: list[str] = []
    by_id: dict[int, Task] = {}
    for t in plan.tasks:
        if t.id in by_id:
            problems.append(f"two tasks have id {t.id}; ids must be unique")
        by_id[t.id] = t

    bad_dep = False  # a missing or self dependency is reported first; cycles are looked for after
    for t in plan.tasks:
        where = f"task {t.id} ({t.task or 'no task type'})"
        spec = task_types.get(t.task)
        if spec is None:
            problems.append(f"{where}: unknown task type{_suggest(t.task)}")
        for d in t.dep:
            if d not in by_id:
                bad_dep = True
                problems.append(f"{where}: depends on task {d}, which is not in the plan")
            elif d == t.id:
                bad_dep = True
                problems.append(f"{where}: depends on itself")
        if spec is not None:
            problems.extend(_check_args(t, spec, by_id, rules, where))

    if not bad_dep:
        try:
            TopologicalSorter({t.id: set(t.dep) for t in plan.tasks}).prepare()
        except CycleError as e:
            cycle = " -> ".join(str(n) for n in e.args[1])
            problems.append(f"the dependencies form a cycle ({cycle}); a plan must be acyclic")
    return problems


def _check_args(
    t: Task, spec: task_types.TaskSpec, by_id: dict[int, Task], rules: FileRules, where: str
) -> list[str]:
    problems = []
    takes = ", ".join(f"{a.name} ({a.kind})" for a in spec.args)
    references = t.references()
    for wanted in spec.args:
        if wanted.required and not t.args.get(wanted.name, "").strip():
            problems.append(
                f"{where}: missing required argument '{wanted.name}' ({wanted.kind}); it takes {takes}"
            )
    for name, value in t.args.items():
        arg = spec.arg(name)
        if arg is None:
            problems.append(f"{where}: has no argument '{name}'; it takes {takes}")
            continue
        refs = references.get(name, [])
        for ref in refs:
            producer = by_id.get(ref)
            if producer is None:
                problems.append(
                    f"{where}: argument '{name}' uses <resource>-{ref}, but there is no task {ref}"
                )
            elif ref not in t.dep:
                problems.append(f"{where}: argument '{name}' uses <resource>-{ref}, so 'dep' must list {ref}")
            else:
                made = task_types.get(producer.task)
                if made is not None and arg.kind not in made.outputs:
                    problems.append(
                        f"{where}: argument '{name}' needs {arg.kind}, but task {ref} ({producer.task}) "
                        f"produces {' and '.join(made.outputs)}"
                    )
        if arg.kind != "text":
            problems.extend(_check_file_arg(name, value, arg.kind, refs, rules, where))
    return problems


def _check_file_arg(
    name: str, value: str, kind: str, refs: list[int], rules: FileRules, where: str
) -> list[str]:
    value = value.strip()
    if refs:
        if not _EXACT_REFERENCE.match(value):
            return [f"{where}: argument '{name}' must be exactly one {kind}: <resource>-N or a file name"]
        return []
    if value.lower().startswith(("http://", "https://")):
        if rules.allow_urls:
            return []
        return [f"{where}: argument '{name}' is a URL, but fetching URLs is turned off; use an uploaded file"]
    if value in rules.uploads or value.lstrip("/") in rules.uploads:
        return []
    offered = ", ".join(sorted(rules.uploads)) or "none were uploaded"
    return [
        f"{where}: argument '{name}' names the file '{value}', which is neither an uploaded file "
        f"({offered}) nor the output of an earlier task"
    ]


def _suggest(name: str) -> str:
    alias = task_types.ALIASES.get(name)
    close = [alias] if alias else difflib.get_close_matches(name, list(task_types.TASKS), n=3, cutoff=0.5)
    return f" '{name}'; did you mean {' or '.join(close)}?" if close else f" '{name}'"
