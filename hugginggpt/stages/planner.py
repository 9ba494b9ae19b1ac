"""Stage 1: turn a request into a valid plan, sending problems back to the LLM to fix."""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field

from hugginggpt import prompts
from hugginggpt import tasks as task_types
from hugginggpt.llms.interface import LLM, Message, Usage
from hugginggpt.run.events import PlanRejected
from hugginggpt.run.steps import drain
from hugginggpt.stages.plan import FileRules, Plan, PlanLimits, PlanParseError, parse_plan, validate_plan
from hugginggpt.stages.plan_schema import plan_schema
from hugginggpt.tasks import TaskSpec
from hugginggpt.text import shorten


@dataclass(frozen=True)
class FileInfo:
    """A file the planner may name: an upload (by name) or an earlier output (by workspace path)."""

    kind: str
    name: str
    new: bool = False  # attached to this message


@dataclass
class PlanOutcome:
    plan: Plan | None
    error: str | None = None
    attempts: int = 0  # LLM calls spent on planning
    problems: list[list[str]] = field(default_factory=list)  # one list per rejected attempt
    replies: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)


def planning_messages(
    request: str,
    *,
    files: Sequence[FileInfo] = (),
    history: Sequence[Message] = (),
    shots: int | None = None,
    history_tokens: int = 1500,
    specs: Iterable[TaskSpec] | None = None,
) -> list[Message]:
    """`specs`: the task types to offer (None: the registry as it stands, tool-added types included)."""
    listed = [
        {
            "name": s.name,
            # The help says what an argument holds where its name cannot (question vs context).
            "args": [
                {
                    "label": f"{a.name} ({a.kind}{'' if a.required else ', optional'}"
                    f"{': ' + a.help if a.help else ''})"
                }
                for a in s.args
            ],
            "outputs": s.outputs,
            "description": s.description,
        }
        for s in (task_types.TASKS.values() if specs is None else specs)
    ]
    return [
        {"role": "system", "content": prompts.render("plan", "system", tasks=listed)},
        *prompts.demo_messages(shots),
        *trim_history(history, history_tokens),
        {"role": "user", "content": prompts.render("plan", "user", request=request, files=list(files))},
    ]


def trim_history(history: Sequence[Message], budget_tokens: int) -> list[Message]:
    """The newest messages that fit the budget (about 4 characters a token), oldest dropped first."""
    kept: list[Message] = []
    used = 0
    for message in reversed(history):
        cost = len(message.get("content", "")) // 4 + 4
        if used + cost > budget_tokens:
            break
        kept.append({"role": message["role"], "content": message["content"]})
        used += cost
    return kept[::-1]


def plan_steps(
    llm: LLM,
    request: str,
    *,
    files: Sequence[FileInfo] = (),
    history: Sequence[Message] = (),
    shots: int | None = None,
    max_retries: int = 2,
    rules: FileRules | None = None,
    history_tokens: int = 1500,
    cancelled: threading.Event | None = None,
    limits: PlanLimits | None = None,
    on_piece: Callable[[str], None] | None = None,
    specs: Iterable[TaskSpec] | None = None,
) -> Generator[PlanRejected, None, PlanOutcome]:
    """Ask for a plan; while it has problems, show them to the LLM and ask again (bounded).

    Yields a PlanRejected event for each rejected plan as it happens; returns the PlanOutcome.
    `rules=None` leaves literal file names unchecked (as for benchmark requests that only mention
    files); otherwise a file argument must name one of `rules.uploads`.
    LLMError (the backend failing) propagates: that is not the plan's fault. Once `cancelled` is
    set no correction is asked for: the outcome then has no plan and no error. `on_piece` sees
    each reply as it streams (streaming_run.py starts tasks from it). `specs`: the task types a
    plan may use (None: the registry as it stands when the call is made).

    The reply is asked for in the typed plan schema (plan_schema.py), which a server may enforce
    and the in-process LLM always does; what no schema can say is checked here all the same.
    """
    offered = list(task_types.TASKS.values() if specs is None else specs)
    messages = planning_messages(
        request, files=files, history=history, shots=shots, history_tokens=history_tokens, specs=offered
    )
    schema = plan_schema(
        offered,
        files=None if rules is None else rules.uploads,
        allow_urls=True if rules is None else rules.allow_urls,
        max_tasks=(limits or PlanLimits()).max_tasks,
    )
    outcome = PlanOutcome(plan=None)
    for attempt in range(1, max_retries + 2):
        completion = llm.complete(messages, stage="plan", schema=schema, on_piece=on_piece)
        reply = completion.text
        outcome.attempts = attempt
        outcome.replies.append(reply)
        outcome.usage.add(completion.usage)
        try:
            plan = parse_plan(reply, limits or PlanLimits())
            problems = validate_plan(plan, rules) if rules is not None else validate_unchecked_files(plan)
        except PlanParseError as e:
            plan, problems = None, [str(e)]
        if not problems:
            outcome.plan = plan
            return outcome
        problems = _bounded(problems)
        outcome.problems.append(problems)
        yield PlanRejected(attempt, problems)
        if cancelled is not None and cancelled.is_set():
            return outcome
        messages = [
            *messages,
            {"role": "assistant", "content": _excerpt(reply)},
            {"role": "user", "content": prompts.render("plan", "correction", problems=problems)},
        ]
    outcome.error = f"No valid plan after {outcome.attempts} attempts. Last problems: " + "; ".join(problems)
    return outcome


MAX_PROBLEMS = 20  # sent back per attempt: enough to fix a plan, never megabytes
MAX_ECHO_CHARS = 4000  # of a rejected reply, when it is sent back to the LLM


def _bounded(problems: list[str]) -> list[str]:
    kept = [shorten(p, 400) for p in problems[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        kept.append(f"... and {len(problems) - MAX_PROBLEMS} more problems")
    return kept


def _excerpt(reply: str) -> str:
    if len(reply) <= MAX_ECHO_CHARS:
        return reply
    return reply[:MAX_ECHO_CHARS] + f"\n[... {len(reply) - MAX_ECHO_CHARS:,} more characters not repeated]"


def make_plan(llm: LLM, request: str, *, on_rejected=None, **options) -> PlanOutcome:
    """`plan_steps` run to the end; `on_rejected(attempt, problems)` hears each rejection."""
    steps = plan_steps(llm, request, **options)
    if on_rejected is None:
        return drain(steps)
    return drain(steps, lambda rejected: on_rejected(rejected.attempt, rejected.problems))


def validate_unchecked_files(plan: Plan) -> list[str]:
    """`validate_plan` with every literal argument allowed as a file name, and URLs allowed."""
    names = frozenset(v for t in plan.tasks for v in t.args.values())
    return validate_plan(plan, FileRules(uploads=names, allow_urls=True))
