"""Stage 2: a model for every task. One LLM call covers all tasks that have a real choice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import json_repair

from . import prompts
from .catalog import Catalog, ModelCard
from .catalog import prompt_lines as catalog_prompt_lines
from .jsontext import first_json_value
from .llm import LLM, LLMError
from .plan import Plan

SELECT_SCHEMA = {
    "type": "object",
    "additionalProperties": {
        "type": "object",
        "properties": {"id": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["id", "reason"],
    },
}


@dataclass
class Choice:
    task_id: int
    task: str
    model: ModelCard | None  # None: no model can run this task
    reason: str
    candidates: list[ModelCard] = field(default_factory=list)
    substituted: bool = False

    def fallbacks(self) -> list[ModelCard]:
        """The chosen model first, then the other candidates in rank order."""
        if self.model is None:
            return []
        return [self.model, *(c for c in self.candidates if c.id != self.model.id)]


def select_models(
    llm: LLM,
    plan: Plan,
    catalog: Catalog,
    request: str,
    *,
    runnable: Callable[[ModelCard], bool] | None = None,
    k: int = 5,
    candidate_tokens: int = 120,
) -> dict[int, Choice]:
    choices: dict[int, Choice] = {}
    open_choices: list[Choice] = []
    for t in plan.tasks:
        candidates = catalog.candidates(t.task, k=k, runnable=runnable)
        if not candidates:
            choices[t.id] = Choice(t.id, t.task, None, f"no model in the catalog can run {t.task} here")
        elif len(candidates) == 1:
            choices[t.id] = Choice(t.id, t.task, candidates[0], "the only candidate", candidates)
        else:
            choices[t.id] = Choice(t.id, t.task, candidates[0], "", candidates)
            open_choices.append(choices[t.id])
    if open_choices:
        _ask_llm(llm, plan, open_choices, request, candidate_tokens)
    return choices


def _ask_llm(llm: LLM, plan: Plan, open_choices: list[Choice], request: str, candidate_tokens: int) -> None:
    by_id = plan.by_id()
    listing = [
        {
            "id": c.task_id,
            "task": c.task,
            "args": by_id[c.task_id].args,
            "candidates": catalog_prompt_lines(c.candidates, max_tokens=candidate_tokens * len(c.candidates)),
        }
        for c in open_choices
    ]
    messages = [
        {"role": "system", "content": prompts.render("select", "system")},
        {"role": "user", "content": prompts.render("select", "user", request=request, tasks=listing)},
    ]
    try:
        reply = _read_picks(llm.complete(messages, stage="select", schema=SELECT_SCHEMA), open_choices)
    except LLMError as e:
        for c in open_choices:
            c.reason = f"the top-ranked candidate, because model selection failed: {e}"
            c.substituted = True
        return
    picks = reply if isinstance(reply, dict) else {}
    for c in open_choices:
        pick = picks.get(str(c.task_id), picks.get(c.task_id))
        named = (pick.get("id") if isinstance(pick, dict) else pick) or ""
        reason = str(pick.get("reason") or "").strip() if isinstance(pick, dict) else ""
        match = next((m for m in c.candidates if m.id == str(named).strip()), None)
        if match is None:
            c.substituted = True
            c.reason = (
                f"the LLM named '{named}', which is not a candidate; using the top-ranked one"
                if named
                else "the LLM made no choice for this task; using the top-ranked candidate"
            )
        else:
            c.model, c.reason = match, reason or "chosen by the LLM"


def _read_picks(reply: str, open_choices: list[Choice]) -> object:
    """The first JSON object keyed by a task id; failing that, what the JSON repair library makes of it."""
    ids = {str(c.task_id) for c in open_choices}
    found = first_json_value(reply, lambda v: isinstance(v, dict) and bool(ids & set(v)), starts="{")
    return found if found is not None else json_repair.loads(reply)
