"""The person in control of the plan, in the chat: review a plan before it runs, edit the last run's
plan and run it again (unchanged tasks come from the result cache), give a task a new seed, and run
a downloaded trace's plan again.

A plan waits on the conversation (`conv.pending`, a review_form.Draft) until it runs or is cancelled;
the page shows it as a form (review_form.form_for) and sends the form's values back here.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hugginggpt.run.pipeline import check_plan
from hugginggpt.run.seeds import MAX_SEED
from hugginggpt.run.traces import read_trace
from hugginggpt.stages.planfile import Edit, GivenPlan
from webui.chat.conversations import TableFull
from webui.chat.engine import BUSY, ChatApp, _note
from webui.chat.render import user_messages
from webui.chat.review_form import Draft, Origin, describe_changes, form_for, read_back
from webui.chat.turns import history_before, request_end
from webui.host.run_entry import Refused
from webui.host.session_settings import LLMChoice

MAX_TRACE_BYTES = 5_000_000  # a trace holds text outputs up to the trace limits; far below this
Update = tuple[list[dict[str, Any]], list[str], bool]  # chat, traces, still running


def pending_form(chat: ChatApp, session: str) -> dict[str, Any] | None:
    """The form of the plan waiting for review in this conversation, if one is: as last sent back
    with problems, else as planned."""
    conv = chat.conversations.find(session)
    if conv is None or conv.pending is None:
        return None
    return conv.pending_form or form_for(conv.pending)


def edit_last_run(chat: ChatApp, session: str) -> dict[str, Any] | None:
    """The last run's plan (with the models that ran it), to edit and run again."""
    conv = chat.conversations.find(session)
    if conv is None or conv.last_run is None or conv.cancel is not None:
        return None
    conv.pending = conv.last_run
    notice = (
        "Edit any task: only what changed, and what depends on it, runs again, in place of the last answer."
    )
    conv.pending_form = form_for(conv.pending, notice=notice)
    return conv.pending_form


def open_trace(
    chat: ChatApp, session: str, path: str | Path, *, client: str
) -> tuple[dict[str, Any] | None, str]:
    """A downloaded trace's plan, its models and seeds, for review; or why the file cannot be used.
    A conversation's first act may be this: it is made here, under the caps, for the caller `client`."""
    path = Path(path)
    try:
        trace = read_trace(path, chat.catalog, max_bytes=MAX_TRACE_BYTES)
    except (OSError, ValueError) as e:  # FileRefused and PlanFileError are ValueErrors
        return None, f"That file is not a trace this app can run again: {_why(e, path)}"
    given = trace.given
    if not given.plan.tasks:
        return None, "That trace's plan has no task: there is nothing to run again."
    of = trace.request_id
    try:
        conv = chat.conversation(session, client)
    except TableFull as e:
        return None, str(e)
    conv.pending, conv.pending_form = (
        Draft(given.request or "", given.plan, given.choices, Origin.TRACE, of),
        None,
    )
    notice = "Every task runs again with the trace's models and seeds."
    if not given.request:
        notice += " The trace has no request text, so the answer is written without it."
    return form_for(conv.pending, notice=notice), ""


def cancel_review(chat: ChatApp, session: str) -> list[dict[str, Any]]:
    conv = chat.find(session)
    if conv is None:
        return []
    if conv.pending is not None and conv.cancel is None:
        waiting = conv.pending is not conv.last_run  # a plan that never ran (not the last one, reopened)
        conv.pending = conv.pending_form = None
        if waiting:  # closing the last run's plan unedited leaves its answer as it was
            conv.display += [_note("The plan was cancelled; nothing ran.")]
    return conv.display


def run_reviewed(
    chat: ChatApp,
    session: str,
    form: dict[str, Any],
    values: Sequence[Any],
    choice: LLMChoice,
    *,
    hf_token: str | None = None,
) -> Iterator[Update]:
    """Runs the plan under review as the form's values leave it; when the validator finds problems
    nothing runs and the form (pending_form) comes back with each problem beside its task."""
    conv = chat.find(session)
    if conv is None:  # ended meanwhile (idle, or deleted in another tab)
        yield [], [], False
        return
    draft = conv.pending
    if draft is None:  # run or cancelled meanwhile (another tab of this conversation)
        yield conv.display, conv.traces, False
        return
    if conv.cancel is not None:
        yield conv.display + [_note(BUSY)], conv.traces, True
        return

    def check(plan):
        return check_plan(plan, conv.workspace, chat.settings)

    # A public app's visitor picks among the catalog's models, never a server folder or any repository.
    reviewed = read_back(draft, form, values, chat.catalog, check, listed_only=chat.public_llm_only)
    if reviewed.plan is None:
        conv.pending_form = reviewed.form
        yield conv.display, conv.traces, False
        return
    label = describe_changes(draft, reviewed.plan, reviewed.choices)
    given = GivenPlan(reviewed.plan, dict(reviewed.choices), request=draft.request)
    # The last run's plan, edited, does that turn again in place; a reviewed or a trace's plan is a turn.
    in_place = None
    if conv.turns and draft.origin is Origin.RAN and conv.last_run is draft:
        in_place = len(conv.turns) - 1
    yield from _run(chat, session, draft, given, {}, label, choice, hf_token, replace=in_place)


def regenerate(
    chat: ChatApp,
    session: str,
    task_ids: Sequence[int] | None,
    choice: LLMChoice,
    *,
    hf_token: str | None = None,
) -> Iterator[Update]:
    """The last run again, in place (webui.chat.turns), with new seeds for `task_ids` (None: every task
    that has a seed): they and what depends on them run, the rest comes from the cache, and the
    answer is written anew. The earlier version folds into a box above the new one."""
    conv = chat.find(session)
    if conv is None:
        yield [], [], False
        return
    draft = conv.last_run
    if draft is None or conv.cancel is not None or not conv.turns:
        yield conv.display + ([_note(BUSY)] if conv.cancel is not None else []), conv.traces, False
        return
    seeded = [i for i, c in draft.choices.items() if c.seed is not None]
    ids = seeded if task_ids is None else list(task_ids)
    if any(i not in draft.plan.by_id() for i in ids):
        problem = _note("Cannot regenerate: that task is not in the last plan")
        yield conv.display + [problem], conv.traces, False
        return
    edits = {i: Edit(seed=secrets.randbelow(MAX_SEED + 1)) for i in ids}
    if len(ids) == 1:
        why = f"a new seed for task {ids[0]} ({edits[ids[0]].seed})"
    else:
        why = "new seeds" if ids else "the answer written again"
    given = GivenPlan(draft.plan, dict(draft.choices), request=draft.request)
    last = len(conv.turns) - 1
    yield from _run(chat, session, draft, given, edits, why, choice, hf_token, replace=last)


def request_of(chat: ChatApp, session: str, turn: int) -> dict[str, Any] | None:
    """The request that began turn `turn`, as the message box sends one: its words and files."""
    conv = chat.find(session)
    if conv is None or not 0 <= turn < len(conv.turns):
        return None
    files = []
    for m in conv.display[conv.turns[turn].start : request_end(conv.display, conv.turns[turn])]:
        part = m.get("content")
        if isinstance(part, dict) and isinstance(part.get("path"), str) and Path(part["path"]).is_file():
            files.append(part["path"])
    return {"text": conv.turns[turn].text, "files": files}


def _run(
    chat,
    session,
    draft: Draft,
    given: GivenPlan,
    edits: dict[int, Edit],
    label: str,
    choice,
    hf_token,
    *,
    replace: int | None = None,
) -> Iterator[Update]:
    """Runs `given` after `edits` through the core's one re-run path (Pipeline.rerun): as a turn of
    its own under a "▶ label" bubble, or with `replace` that turn again in place, `label` saying why."""
    conv = chat.find(session)
    if conv is None:
        return
    try:  # charged to the conversation's caller, as its first request was (webui.host.run_entry)
        pipeline = chat.pipeline_for(choice, conv.client, hf_token)
    except Refused as e:
        yield conv.display + [_note(str(e))], conv.traces, False
        return
    conv.requests += 1
    history = history_before(conv.history, conv.turns, replace)
    header = {f"{draft.origin}_from": draft.of} if draft.of else {}

    def start(cancel):
        return pipeline.rerun(
            given,
            edits,
            workspace=conv.workspace,
            history=history,
            cancelled=cancel,
            use_cache=draft.origin is not Origin.TRACE,  # a trace's plan runs every task, as replay does
            header=header,
        )

    user = [] if replace is not None else user_messages(f"▶ {label}", [])
    yield from chat.stream_run(conv, session, draft.request, user, start, replace=replace, why=label)


def _why(error: Exception, path: Path) -> str:
    return str(error).replace(str(path), path.name)
