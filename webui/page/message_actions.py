"""The actions under the last message of the chat: Gradio's message options, one button each.

A finished run offers a new seed for each image, sound or clip it drew, and its plan to edit; both
do the turn again in place (webui.chat.turns). The new seeds are one menu: a run that drew several
outputs shows one "New seed ▾" button, which opens into an entry per task (and folds again), so a run
of six images ends with two buttons, not seven. A request a restart cut off offers to continue its run.
The chat's own retry icon regenerates the whole turn and its pencil edits a request. Options show
only under the chat's last message, and only once its run has ended, so nothing here can be
clicked while a run goes.
No Gradio here: an option is the dict {"label", "value"} that gr.Chatbot takes.
"""

from __future__ import annotations

from typing import Any

from hugginggpt import tasks as task_types

REGENERATE = "regenerate:"
EDIT_PLAN = "edit-plan"
CONTINUE = "continue"  # a run a restart cut off, taken up where it stopped (webui.chat.resume_runs)
SEEDS_OPEN, SEEDS_CLOSE = "seeds-open", "seeds-close"  # the new-seed menu opened, folded again
MENU = (SEEDS_OPEN, SEEDS_CLOSE)  # options that only redraw the options: nothing runs
_WORDS = {"audio": "voice"}  # a regenerated output's kind, in the option's words


def options(conv: Any, *, seeds_open: bool = False) -> list[dict[str, str]]:
    """The options of the conversation `conv` (webui.chat.conversations), for its last message; with
    `seeds_open`, its new-seed menu opened."""
    if conv is not None and conv.resumable is not None and conv.cancel is None:
        return [{"label": "▶ Continue", "value": CONTINUE}]  # a request a restart cut off
    draft = None if conv is None or conv.pending is not None else conv.last_run
    if draft is None:
        return []
    tasks = draft.plan.by_id()
    seeds = [
        {"label": f"↻ New {_made(tasks[i].task)} for task {i}", "value": f"{REGENERATE}{i}"}
        for i in sorted(draft.made_media)
        if i in tasks
    ]
    edit = {"label": "✎ Edit the plan", "value": EDIT_PLAN}
    if len(seeds) <= 1:  # one entry needs no menu
        return [*seeds, edit]
    if not seeds_open:
        return [{"label": f"↻ New seed ▾ ({len(seeds)} outputs)", "value": SEEDS_OPEN}, edit]
    return [{"label": "↻ New seed ▴", "value": SEEDS_CLOSE}, *seeds, edit]


def _made(task: str) -> str:
    spec = task_types.get(task)
    kind = spec.outputs[0] if spec is not None else "image"
    return _WORDS.get(kind, kind)


def with_options(messages: list[dict[str, Any]], offered: list[dict[str, str]]) -> list[dict[str, Any]]:
    """`messages` with `offered` under the last one (an assistant's: Gradio shows no others), unless
    it has options already (the new-seed menu, as the person opened or folded it)."""
    if not offered or not messages or messages[-1].get("role") != "assistant" or "options" in messages[-1]:
        return messages
    return [*messages[:-1], {**messages[-1], "options": offered}]


def regenerated_task(value: Any) -> int | None:
    """The task id of a "new seed" option's value; None for any other value."""
    if isinstance(value, str) and value.startswith(REGENERATE) and value[len(REGENERATE) :].isdigit():
        return int(value[len(REGENERATE) :])
    return None
