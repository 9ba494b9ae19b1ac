"""A plan under review in the app: what the form shows, and the form's values read back as edits.

No gradio here. A Draft is the plan and its models as they stand on the server (the LLM's plan
after planning and selection, the plan of the last run, or a downloaded trace's). Its form is a
plain dict (kept in a gr.State, so on the server) of strings as the fields show them, and the
problems the validator found, by task; the form's values come back as planfile Edits and go
through the same validator as the LLM's plans (Pipeline.check_plan) before anything runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hugginggpt.catalog import Catalog
from hugginggpt.run.seeds import MAX_SEED
from hugginggpt.stages.plan import RESOURCE_REF, Plan, Task
from hugginggpt.stages.planfile import Edit, PlanFileError, apply_edits, given_plan, problems_by_task, to_json
from hugginggpt.stages.selection import Choice


class Origin(StrEnum):
    PLANNED = "planned"  # planned and selected, nothing ran yet
    RAN = "ran"  # the plan of the conversation's last run: a run of the edited plan reuses the cache
    TRACE = "trace"  # a downloaded trace's plan: every task runs again


@dataclass(frozen=True)
class Draft:
    request: str
    plan: Plan
    choices: Mapping[int, Choice]
    origin: Origin
    of: str | None = None  # the request id of the run (or trace) it comes from
    made_media: frozenset[int] = frozenset()  # tasks that drew an image, clip or video from a seed


def draft_to_json(draft: Draft) -> dict[str, Any]:
    """A draft as saved with its conversation (chat.conversations): a plan file and where it came from."""
    raw = to_json(draft.plan, draft.choices, draft.request)
    return {**raw, "origin": str(draft.origin), "of": draft.of, "made_media": sorted(draft.made_media)}


def draft_from_json(raw: Any, catalog: Catalog) -> Draft | None:
    """A saved draft, read as any plan file is (its models checked); None when it cannot be used."""
    if not isinstance(raw, dict):
        return None
    try:
        given = given_plan(raw, catalog, reason="as it ran before")
        origin = Origin(str(raw.get("origin")))
    except ValueError:  # PlanFileError is one
        return None
    made = frozenset(i for i in raw.get("made_media") or [] if isinstance(i, int) and i in given.plan.by_id())
    of = raw.get("of") if isinstance(raw.get("of"), str) else None
    return Draft(given.request or "", given.plan, given.choices, origin, of, made)


VERBS = {
    Origin.PLANNED: "Run the plan",
    Origin.RAN: "Run the plan again",
    Origin.TRACE: "Run the trace's plan",
}
FIELDS = ("model", "dep", "seed", "delete")  # a task's fields besides its arguments


@dataclass
class Reviewed:
    """The form read back: the plan to run, or the problems to show beside the fields."""

    plan: Plan | None = None
    choices: dict[int, Choice] = field(default_factory=dict)
    form: dict[str, Any] = field(default_factory=dict)  # the values as typed, with their problems


def shown_arg(value: Any) -> str:
    """An argument as the chat says it: `<resource>-0` reads "output of task 0"."""
    return RESOURCE_REF.sub(lambda m: f"output of task {m.group(1)}", str(value))


def plan_arg(text: str) -> str:
    """What a person typed, with "output of task N" as the plan's reference to it again."""
    return _OUTPUT_OF.sub(lambda m: f"<resource>-{m.group(1)}", text)


_OUTPUT_OF = re.compile(r"\boutput of task (\d+)\b", re.IGNORECASE)


def form_for(draft: Draft, *, notice: str = "") -> dict[str, Any]:
    """The form's content: one entry per task, every value as its field shows it."""
    tasks = []
    for t in draft.plan.tasks:
        choice = draft.choices.get(t.id)
        model = choice.model.id if choice is not None and choice.model is not None else ""
        candidates = [m.id for m in choice.candidates] if choice is not None else []
        tasks.append(
            {
                "id": t.id,
                "task": t.task,
                "model": model,
                "candidates": list(dict.fromkeys([model, *candidates] if model else candidates)),
                "dep": deps_text(t.dep),
                "seed": "" if choice is None or choice.seed is None else str(choice.seed),
                "delete": False,
                "args": {name: shown_arg(value) for name, value in t.args.items()},
                "problems": [],
                "estimate": estimate_text(choice),
            }
        )
    return {"origin": str(draft.origin), "tasks": tasks, "problems": [], "notice": notice}


def estimate_text(choice: Choice | None) -> str:
    """What the chosen model will take, and what the user's limits left out (shown under the task)."""
    if choice is None or choice.estimate is None:
        return ""
    left_out = "".join(f"\nLeft out by your limits: {e.id}: {e.why}" for e in choice.excluded)
    return f"Estimate: {choice.estimate.line()}{left_out}"


def deps_text(dep: Sequence[int]) -> str:
    return ", ".join(str(d) for d in dep if d >= 0) or "none"


def field_names(form: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(task id, field) for every field of the form, in the order the page lays them out:
    per task its model, dependencies, seed, delete box, then each argument as "arg:<name>"."""
    names = []
    for t in form.get("tasks", []):
        names += [(t["id"], f) for f in FIELDS]
        names += [(t["id"], f"arg:{name}") for name in t["args"]]
    return names


def read_back(
    draft: Draft,
    form: Mapping[str, Any],
    values: Sequence[Any],
    catalog: Catalog,
    check,
    *,
    listed_only: bool = False,
) -> Reviewed:
    """The form's `values` (in field_names order) as the plan to run, or the problems beside each
    field. `check(plan)` is the validator (Pipeline.check_plan bound to the conversation).
    `listed_only` (a public app): every model must be one the catalog lists for its task, never a
    folder on the server or any repository a visitor names."""
    typed = _typed(form, values)
    edits: dict[int, Edit] = {}
    problems: dict[int | None, list[str]] = {}
    by_id = draft.plan.by_id()
    for t in typed["tasks"]:
        try:
            edit = _edit(t, by_id[t["id"]], draft.choices.get(t["id"]))
        except ValueError as e:
            problems.setdefault(t["id"], []).append(str(e))
            continue
        if edit is not None:
            edits[t["id"]] = edit
    if not problems:
        try:
            plan, choices = apply_edits(draft.plan, draft.choices, edits, catalog)
        except PlanFileError as e:  # "task N ..." goes beside its task
            problems = problems_by_task([str(e)])
        else:
            if not plan.tasks and draft.plan.tasks:
                problems[None] = ["every task is deleted: there is nothing to run (press Cancel instead)"]
            else:
                problems = problems_by_task(check(plan))
                for task_id, problem in _unlisted(plan, choices, catalog, listed_only):
                    problems.setdefault(task_id, []).append(problem)
                if not problems:
                    return Reviewed(plan, choices, typed)
    for t in typed["tasks"]:
        t["problems"] = problems.get(t["id"], [])
    typed["problems"] = problems.get(None, [])
    return Reviewed(form=typed)


def _unlisted(plan: Plan, choices: Mapping[int, Choice], catalog: Catalog, listed_only: bool):
    if not listed_only:
        return
    for t in plan.tasks:
        choice = choices.get(t.id)
        if choice is not None and choice.model is not None and catalog.get(choice.model.id, t.task) is None:
            yield (
                t.id,
                f"{choice.model.id} is not one of this app's models for {t.task}: pick one from the list",
            )


def _typed(form: Mapping[str, Any], values: Sequence[Any]) -> dict[str, Any]:
    """The form with each field's value as the person left it."""
    typed = json.loads(json.dumps(form))  # a copy: the shown form stays as it was
    tasks = {t["id"]: t for t in typed["tasks"]}
    for (task_id, name), value in zip(field_names(form), values, strict=True):
        task = tasks[task_id]
        if name.startswith("arg:"):
            task["args"][name[4:]] = "" if value is None else plan_arg(str(value))
        elif name == "delete":
            task["delete"] = bool(value)
        else:
            task[name] = "" if value is None else str(value).strip()
    return typed


def _edit(typed: Mapping[str, Any], task: Task, choice: Choice | None) -> Edit | None:
    """What changed in one task; None when nothing did. ValueError says what cannot be read."""
    if typed["delete"]:
        return Edit(delete=True)
    deps, seed, model = _deps(typed["dep"]), _seed(typed["seed"]), typed["model"]
    shown_model = choice.model.id if choice is not None and choice.model is not None else ""
    edit = Edit(
        args=dict(typed["args"]),
        dep=deps if deps != tuple(d for d in task.dep if d >= 0) else None,
        model=model if model and model != shown_model else None,
        seed=seed if seed is not None and (choice is None or seed != choice.seed) else None,
    )
    unchanged = edit.dep is None and edit.model is None and edit.seed is None
    return None if unchanged and edit.args == task.args else edit


def _deps(text: str) -> tuple[int, ...]:
    if text.lower() in ("", "none", "-", "-1"):
        return ()
    parts = [p.strip() for p in text.replace(";", ",").split(",") if p.strip()]
    if not all(p.isdigit() for p in parts):
        raise ValueError(f"dependencies are task numbers separated by commas (or none), not {text!r}")
    return tuple(dict.fromkeys(int(p) for p in parts))


def _seed(text: str) -> int | None:
    if not text:
        return None
    if not text.isdigit() or int(text) > MAX_SEED:
        raise ValueError(f"a seed is a whole number from 0 to {MAX_SEED}, not {text!r}")
    return int(text)


def describe_changes(draft: Draft, plan: Plan, choices: Mapping[int, Choice]) -> str:
    """The person's bubble for a reviewed run: what they changed, in a few words."""
    before = draft.plan.by_id()
    changes = []
    for task_id, old in before.items():
        new = plan.by_id().get(task_id)
        if new is None:
            changes.append(f"task {task_id} deleted")
            continue
        was, now = draft.choices.get(task_id), choices.get(task_id)
        what = [
            name
            for name, changed in (
                ("arguments", new.args != old.args),
                ("dependencies", new.dep != old.dep),
                ("model", _model(was) != _model(now)),
                ("seed", (was.seed if was else None) != (now.seed if now else None)),
            )
            if changed
        ]
        if what:
            changes.append(f"task {task_id}: {', '.join(what)} changed")
    verb = {
        Origin.PLANNED: "Run the plan",
        Origin.RAN: "Run the plan again",
        Origin.TRACE: "Run the trace's plan",
    }
    return verb[draft.origin] + (f" ({'; '.join(changes)})" if changes else "")


def _model(choice: Choice | None) -> str | None:
    return choice.model.id if choice is not None and choice.model is not None else None
