"""Stage 2: a model for every task. One LLM call covers all tasks that have a real choice."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import json_repair

from hugginggpt import prompts
from hugginggpt.catalog import Catalog, ModelCard
from hugginggpt.catalog import prompt_lines as catalog_prompt_lines
from hugginggpt.llms.interface import LLM, LLMError
from hugginggpt.llms.jsontext import first_json_value
from hugginggpt.run.events import ModelSelected
from hugginggpt.stages.choice import Choice, PickSource
from hugginggpt.stages.plan import Plan, Task, nesting_depth
from hugginggpt.stages.plan_schema import selection_schema

MAX_REPLY_CHARS = 50_000  # a choice per task needs far less
MAX_DEPTH = 16


def select_steps(
    llm: LLM,
    plan: Plan,
    catalog: Catalog,
    request: str,
    *,
    runnable: Callable[[ModelCard], bool] | None = None,
    k: int = 5,
    candidate_tokens: int = 120,
) -> Generator[ModelSelected, None, dict[int, Choice]]:
    """Choose a model per task: yields ModelSelected for each task that has one; returns the choices.

    One LLM call covers every task with more than one candidate; a failed call or a pick that is
    not a candidate falls back to the top-ranked candidate, recorded as such.
    """
    offered = {t.id: tuple(catalog.candidates(t.task, k=k, runnable=runnable)) for t in plan.tasks}
    open_tasks = [t for t in plan.tasks if len(offered[t.id]) > 1]
    picks: dict[str, Any] = {}
    failure = None
    if open_tasks:
        try:
            picks = _ask_llm(llm, open_tasks, offered, request, candidate_tokens)
        except LLMError as e:
            failure = str(e)
    choices: dict[int, Choice] = {}
    for t in plan.tasks:
        choices[t.id] = choice = _choose(t.id, t.task, offered[t.id], picks, failure)
        if choice.model is not None:
            yield ModelSelected(
                t.id, t.task, choice.model.id, choice.reason, [m.id for m in choice.candidates], choice.source
            )
    return choices


def _choose(
    task_id: int, task: str, candidates: tuple[ModelCard, ...], picks: dict[str, Any], failure: str | None
) -> Choice:
    if not candidates:
        reason = f"no model in the catalog can run {task} here"
        return Choice(task_id, task, None, reason, (), PickSource.NO_CANDIDATE)
    if len(candidates) == 1:
        return Choice(
            task_id, task, candidates[0], "the only candidate", candidates, PickSource.ONLY_CANDIDATE
        )
    top = candidates[0]
    if failure is not None:
        reason = f"the top-ranked candidate, because model selection failed: {failure}"
        return Choice(task_id, task, top, reason, candidates, PickSource.SELECTION_FAILED)
    pick = picks.get(str(task_id), picks.get(task_id))  # type: ignore[call-overload]
    named = str((pick.get("id") if isinstance(pick, dict) else pick) or "").strip()
    match = next((m for m in candidates if m.id == named), None)
    if match is None:
        reason = (
            f"the LLM named '{named}', which is not a candidate; using the top-ranked one"
            if named
            else "the LLM made no choice for this task; using the top-ranked candidate"
        )
        return Choice(task_id, task, top, reason, candidates, PickSource.NOT_A_CANDIDATE)
    reason = str(pick.get("reason") or "").strip() if isinstance(pick, dict) else ""
    return Choice(task_id, task, match, reason or "chosen by the LLM", candidates, PickSource.LLM)


def _ask_llm(
    llm: LLM,
    open_tasks: list[Task],
    offered: dict[int, tuple[ModelCard, ...]],
    request: str,
    candidate_tokens: int,
) -> dict[str, Any]:
    listing = [
        {
            "id": t.id,
            "task": t.task,
            "args": t.args,
            "candidates": catalog_prompt_lines(
                list(offered[t.id]), max_tokens=candidate_tokens * len(offered[t.id])
            ),
        }
        for t in open_tasks
    ]
    messages = [
        {"role": "system", "content": prompts.render("select", "system")},
        {"role": "user", "content": prompts.render("select", "user", request=request, tasks=listing)},
    ]
    # The reply's schema names this plan's tasks and each one's candidates: a server that enforces
    # it (and the in-process LLM) can only pick a candidate; others are checked in _choose.
    schema = selection_schema({t.id: [m.id for m in offered[t.id]] for t in open_tasks})
    reply = _read_picks(llm.complete(messages, stage="select", schema=schema).text, open_tasks)
    return reply if isinstance(reply, dict) else {}


def _read_picks(reply: str, open_tasks: list[Task]) -> object:
    """The first JSON object keyed by a task id; failing that, what the JSON repair library makes of it."""
    if len(reply) > MAX_REPLY_CHARS or nesting_depth(reply) > MAX_DEPTH:
        return {}  # no choice read: every task gets its top-ranked candidate, recorded as such
    ids = {str(t.id) for t in open_tasks}
    found = first_json_value(reply, lambda v: isinstance(v, dict) and bool(ids & set(v)), starts="{")
    return found if found is not None else json_repair.loads(reply)
