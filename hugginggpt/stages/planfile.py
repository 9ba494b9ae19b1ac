"""Plans a person gives or edits: the JSON that `--plan-only` prints and `--plan FILE` reads, and edits.

    {"request": "...",
     "plan": [{"task": "text-to-image", "id": 0, "dep": [-1], "args": {"text": "a cat"}}, ...],
     "choices": {"0": {"model": "some/model", "seed": 7, ...}, ...}}

Only "plan" is required (a bare list is read as the plan). A choice names the model of a task (the
others are selected as usual) and may give its seed; other fields of a choice (reason, candidates,
what --plan-only adds) are ignored. A model the catalog does not list for the task must be a
Hugging Face model id (model_ids.py): a URL or a folder that the catalog does not list is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hugginggpt.catalog import Catalog
from hugginggpt.catalog.model_ids import ModelIdRefused, named_model
from hugginggpt.files.bounded_file import FileRefused, read_json
from hugginggpt.run.events import PickSource
from hugginggpt.run.records import TaskRecord, TaskStatus
from hugginggpt.run.seeds import check_seed
from hugginggpt.stages.plan import Plan, PlanParseError, Task, parse_plan
from hugginggpt.stages.selection import Choice

# A task id as a "choices" key: ASCII digits, not "²" nor 5,000 of them (int() refuses both).
TASK_KEY = re.compile(r"-?[0-9]{1,9}")


class PlanFileError(ValueError):
    """A plan file or an edit that cannot be used; the message says why."""


@dataclass(frozen=True)
class GivenPlan:
    plan: Plan
    choices: dict[int, Choice] = field(default_factory=dict)  # the tasks whose model is given
    seeds: dict[int, int] = field(default_factory=dict)  # seeds given, also where the model is not
    request: str | None = None


def read_plan_file(path: Path, catalog: Catalog) -> GivenPlan:
    try:
        raw = read_json(path)
    except FileRefused as e:
        raise PlanFileError(str(e)) from None
    return given_plan(raw, catalog)


def given_plan(raw: Any, catalog: Catalog, *, reason: str = "given in the plan") -> GivenPlan:
    """A plan and its choices from their JSON form (see the module's docstring)."""
    if isinstance(raw, list):
        raw = {"plan": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("plan"), list):
        raise PlanFileError('a plan file is a JSON object with a "plan" list of tasks')
    try:
        plan = parse_plan(json.dumps(raw["plan"])) if raw["plan"] else Plan([])
    except PlanParseError as e:
        raise PlanFileError(f"the plan cannot be read: {e}") from None
    request = raw.get("request")
    if request is not None and not isinstance(request, str):
        raise PlanFileError('"request" must be a string')
    entries = raw.get("choices") or {}
    if not isinstance(entries, dict):
        raise PlanFileError('"choices" must be an object keyed by task id')
    by_id = plan.by_id()
    choices: dict[int, Choice] = {}
    seeds: dict[int, int] = {}
    for key, entry in entries.items():
        task = by_id.get(int(key)) if TASK_KEY.fullmatch(str(key)) else None
        if task is None:
            raise PlanFileError(f'"choices" names task {str(key)[:40]!r}, which is not in the plan')
        if not isinstance(entry, dict):
            entry = {"model": entry}  # "0": "some/model" is read as the model
        model, seed = entry.get("model"), entry.get("seed")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise PlanFileError(f"task {task.id}: the model must be a model id or a folder, not {model!r}")
        try:
            if seed is not None:
                seeds[task.id] = check_seed(seed, f"task {task.id}")
        except ValueError as e:
            raise PlanFileError(str(e)) from None
        if model is not None:
            choices[task.id] = given_choice(
                task, model.strip(), catalog, seed=seeds.get(task.id), reason=reason
            )
    return GivenPlan(plan, choices, seeds, request)


def to_json(plan: Plan, choices: Mapping[int, Choice], request: str | None = None) -> dict[str, Any]:
    """What --plan-only prints and --plan FILE reads back."""
    raw: dict[str, Any] = {}
    if request is not None:
        raw["request"] = request
    raw["plan"] = plan.to_json()
    raw["choices"] = {str(t.id): choices[t.id].to_json() for t in plan.tasks if t.id in choices}
    return raw


def given_choice(
    task: Task, model_id: str, catalog: Catalog, *, seed: int | None = None, reason: str = "given"
) -> Choice:
    """A model named by a person, a file or a trace: the catalog's card, else a Hub id's."""
    try:
        card = named_model(model_id, task.task, catalog)
    except ModelIdRefused as e:
        raise PlanFileError(f"task {task.id} model {e}") from None
    return Choice(task.id, task.task, card, reason, (card,), PickSource.GIVEN, seed)


# ---------------------------------------------------------------- edits


@dataclass(frozen=True)
class Edit:
    """A change to one task: argument values (None removes one), its dependencies, its model, its
    seed (a new one regenerates), or its removal."""

    args: Mapping[str, str | None] = field(default_factory=dict)
    dep: tuple[int, ...] | None = None
    model: str | None = None
    seed: int | None = None
    delete: bool = False


def apply_edits(
    plan: Plan, choices: Mapping[int, Choice], edits: Mapping[int, Edit], catalog: Catalog
) -> tuple[Plan, dict[int, Choice]]:
    """The edited plan and choices. The result still has to pass validation (Pipeline.check_plan)."""
    by_id = plan.by_id()
    missing = [str(i) for i in edits if i not in by_id]
    if missing:
        raise PlanFileError(f"there is no task {', '.join(missing)} in the plan")
    tasks: list[Task] = []
    edited: dict[int, Choice] = {}
    for t in plan.tasks:
        edit = edits.get(t.id)
        choice = choices.get(t.id)
        if edit is None:
            tasks.append(t)
            if choice is not None:
                edited[t.id] = choice
            continue
        if edit.delete:
            continue
        args = dict(t.args)
        for name, value in edit.args.items():
            if value is None:
                args.pop(name, None)
            else:
                args[name] = str(value)
        task = Task(t.id, t.task, list(edit.dep) if edit.dep is not None else list(t.dep), args)
        tasks.append(task)
        seed = choice.seed if choice is not None else None
        if edit.seed is not None:
            try:
                seed = check_seed(edit.seed, f"task {t.id}")
            except ValueError as e:
                raise PlanFileError(str(e)) from None
        if edit.model is not None:
            choice = given_choice(task, edit.model, catalog, seed=seed, reason="chosen by the user")
        elif choice is not None:
            choice = replace(choice, seed=seed)
        if choice is not None:
            edited[t.id] = choice
    return Plan(tasks), edited


def choices_as_ran(
    choices: Mapping[int, Choice], records: Iterable[TaskRecord], catalog: Catalog
) -> dict[int, Choice]:
    """A run's choices, each with the model that made its task's outputs (a fallback may have): a
    re-run does not try again the model that failed."""
    ran = dict(choices)
    for record in records:
        choice = ran.get(record.id)
        if choice is None or choice.model is None or record.status is not TaskStatus.DONE:
            continue
        if record.model is not None and record.model != choice.model.id:
            card = next((m for m in choice.candidates if m.id == record.model), None)
            card = card or catalog.get(record.model, record.task)
            if card is not None:
                ran[record.id] = replace(choice, model=card)
    return ran


_TASK_PROBLEM = re.compile(r"^task (-?\d+) ")


def problems_by_task(problems: list[str]) -> dict[int | None, list[str]]:
    """A validator's problems grouped by the task they name (None: the plan as a whole), so a form
    can show each beside its task."""
    grouped: dict[int | None, list[str]] = {}
    for problem in problems:
        match = _TASK_PROBLEM.match(problem)
        grouped.setdefault(int(match.group(1)) if match else None, []).append(problem)
    return grouped
