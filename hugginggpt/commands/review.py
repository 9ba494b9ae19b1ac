"""The plan shown to a person before it runs: as lines (`--plan-only`), and the terminal's review
loop (`--review`): run it, edit it in $VISUAL / $EDITOR (as the JSON of a plan file), or cancel.

An edited plan goes through the same validator as the LLM's; its problems are shown and the plan
is offered again.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from hugginggpt.catalog import Catalog
from hugginggpt.files.bounded_file import FileRefused, read_json
from hugginggpt.stages.plan import Plan
from hugginggpt.stages.planfile import GivenPlan, PlanFileError, given_plan, to_json
from hugginggpt.stages.selection import Choice


def plan_lines(plan: Plan, choices: Mapping[int, Choice]) -> list[str]:
    """Each task with its model, seed, dependencies and arguments, for a terminal."""
    lines = []
    for t in plan.tasks:
        choice = choices.get(t.id)
        model = choice.model.id if choice is not None and choice.model is not None else "(no model)"
        seed = f", seed {choice.seed}" if choice is not None and choice.seed is not None else ""
        needs = f", after task {', '.join(map(str, t.dep))}" if t.dep else ""
        lines.append(f"task {t.id}: {t.task} with {model}{seed}{needs}")
        if choice is not None and choice.reason:
            lines.append(f"    why: {choice.reason}")
        if choice is not None and choice.estimate is not None:
            lines.append(f"    estimate: {choice.estimate.line()}")
        if choice is not None:
            lines += [f"    left out: {e.id}: {e.why}" for e in choice.excluded]
        lines += [f"    {name} = {json.dumps(value, ensure_ascii=False)}" for name, value in t.args.items()]
    return lines or ["(no task: the answer is written directly)"]


def review(
    request: str,
    plan: Plan,
    choices: Mapping[int, Choice],
    *,
    catalog: Catalog,
    check: Callable[[Plan], list[str]],
    stdin: TextIO,
    out: TextIO,
) -> GivenPlan | None:
    """Ask until the person runs the plan (returned, maybe edited) or cancels (None).
    `check(plan)` returns the validator's problems."""
    current = GivenPlan(plan, dict(choices), {}, request)
    while True:
        out.write("\n".join(plan_lines(current.plan, current.choices)) + "\n")
        out.write("Run this plan? [y]es, [e]dit, [n]o: ")
        out.flush()
        answer = stdin.readline()
        if not answer:  # end of input
            return None
        answer = answer.strip().lower()
        if answer in ("y", "yes"):
            return current
        if answer in ("n", "no", "q", "quit"):
            return None
        if answer not in ("e", "edit"):
            out.write("Please answer y, e or n.\n")
            continue
        edited = _edit(to_json(current.plan, current.choices, request), out)
        if edited is None:
            continue
        try:
            candidate = given_plan(edited, catalog)
        except PlanFileError as e:
            out.write(f"The edited plan was not used: {e}\n")
            continue
        problems = check(candidate.plan)
        if problems:
            out.write("The edited plan was not used:\n" + "".join(f"  - {p}\n" for p in problems))
            continue
        current = candidate


def _edit(raw: dict, out: TextIO) -> object | None:
    """The JSON the person saved in their editor; None (and why) when there is none to use."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    fd, name = tempfile.mkstemp(prefix="hugginggpt-plan-", suffix=".json")
    path = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(raw, f, indent=2, ensure_ascii=False)
        try:
            status = subprocess.run([*shlex.split(editor), str(path)], check=False).returncode
        except OSError as e:
            out.write(f"Cannot start the editor {editor!r} ($VISUAL or $EDITOR): {e}\n")
            return None
        if status != 0:
            out.write(f"The editor ended with status {status}; the plan is unchanged.\n")
            return None
        try:
            return read_json(path)
        except FileRefused as e:
            out.write(f"The edited plan cannot be used ({e}); the plan is unchanged.\n")
            return None
    finally:
        path.unlink(missing_ok=True)
