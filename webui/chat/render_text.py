"""The words and marks of the chat's messages (webui.chat.render builds the messages from them): links to
models, task-state badges, the plan as a list, the person's bubbles, a finished run's summary line, text cut
to a readable length.

No gradio import here; everything the LLM, a model or a plan wrote passes through webui.chat.safe_html.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hugginggpt.files.artifacts import Artifact
from hugginggpt.run.events import Done, Outcome, PickSource
from hugginggpt.stages.plan import RESOURCE_REF, Plan
from webui.chat.safe_html import clean, plain

HUB = "https://huggingface.co/"
# Why a task runs a model the LLM did not pick (the reason says more).
SOURCE_NOTES = {
    PickSource.NOT_A_CANDIDATE: " (the LLM named no offered model; the top-ranked one runs)",
    PickSource.SELECTION_FAILED: " (model selection failed; the top-ranked one runs)",
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
# A task state: the mark and word in its title (a CSS class colours them) and in the plan's list.
MARKS = {
    "waiting": "○",
    "running": "◔",
    "done": "✓",
    "failed": "✕",
    "skipped": "↷",
    "stopped": "■",
    "not finished": "■",
}
# Tasks whose image output is drawn over their input image: what the caption says it shows.
ANNOTATES = {
    "object-detection": ("boxes drawn on", "no objects found"),
    "image-segmentation": ("segments coloured on", "no segments found"),
}
MAX_TEXT = 1500


def model_link(model: str) -> str:
    """Markdown link to the model's Hub page (plain code text for names that cannot be hub ids)."""
    return f"[{model}]({HUB}{model})" if _HUB_ID.match(model) else f"`{plain(model)}`"


def state_badge(state: str) -> str:
    return f'<span class="hg-state hg-{state.replace(" ", "-")}">{MARKS[state]} {state}</span>'


def plan_markdown(
    plan: Plan, states: dict[int, str] | None = None, estimates: dict[int, str] | None = None
) -> str:
    """A readable numbered list of tasks, their arguments, what each waits for and what its model
    is estimated to take (the diagram's text for screen readers)."""
    if not plan.tasks:
        return "No model is needed for this request: answering directly."
    lines = []
    for t in plan.tasks:
        args = ", ".join(f"{plain(n)}: {_argument(v)}" for n, v in t.args.items()) or "no arguments"
        after = [d for d in t.dep if d >= 0]
        waits = f" · after task {', '.join(map(str, after))}" if after else " · starts at once"
        state = f" · {MARKS[states[t.id]]} {states[t.id]}" if states and t.id in states else ""
        cost = f" · {plain(estimates[t.id])}" if estimates and t.id in estimates else ""
        lines.append(f"{t.id}. **{plain(t.task)}** ({args}){waits}{state}{cost}")
    return "\n".join(lines)


def _argument(value: Any) -> str:
    text = RESOURCE_REF.sub(lambda m: f"output of task {m.group(1)}", str(value))
    text = plain(text if len(text) <= 80 else text[:77] + "...")
    return f"`{text}`" if text == value and not text.startswith("output of") else f"*{text}*"


def user_messages(text: str, files: list[str]) -> list[dict[str, Any]]:
    """The person's request: a message per attached file, then one of the text, which the chat
    shows as one bubble. The text stands alone so that the chat's pencil can edit it (Gradio's
    edit takes a message of text only)."""
    out = [{"role": "user", "content": {"path": f, "alt_text": f"attached: {Path(f).name}"}} for f in files]
    return out + ([{"role": "user", "content": clean(text)}] if text else [])


def add_text(node: dict[str, Any], text: str) -> None:
    node["content"] = f"{node['content']}\n\n{text}" if node["content"] else text


def shortened(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def value_text(artifact: Artifact) -> str:
    if isinstance(artifact.value, str):
        return clean(short_block(artifact.value))
    text = json.dumps(artifact.value, ensure_ascii=False, default=str)
    return "```json\n" + clean(short_block(text)) + "\n```"


def short_block(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "..."


def summary_line(
    done: Done, seconds: str, plan: Plan | None, states: dict[int, str], models: dict[int, str]
) -> str:
    """The line over a finished run: its tasks and models, its time, what went wrong, the restarts it
    was continued after, and the tokens and cost of every attempt."""
    n = len(plan.tasks) if plan else 0
    counts: dict[str, int] = {}
    for state in states.values():
        counts[state] = counts.get(state, 0) + 1
    if done.outcome is Outcome.CANCELLED:
        return f"{state_badge('stopped')} after {seconds} · {counts.get('done', 0)} of {n} tasks done"
    if plan is None:
        return f"{state_badge('failed')} · {seconds}"
    if done.outcome is Outcome.PLANNED:
        return f"Plan ready for review · {n} task{'s' if n != 1 else ''} · {seconds}"
    if not n:
        return f"Answered without models · {seconds}"
    used = len({m for i, m in models.items() if states.get(i) == "done"})
    parts = [f"{n} task{'s' if n != 1 else ''}", f"{used} model{'s' if used != 1 else ''}", seconds]
    parts += [f"{state_badge(s)} {counts[s]}" for s in ("failed", "skipped", "not finished") if counts.get(s)]
    crashes = int(done.trace.get("crashes") or 0)  # continued after a restart (run.resume)
    if crashes:
        parts.append(f"continued after {crashes} restart{'s' if crashes != 1 else ''}")
    spent = done.usage  # every attempt's tokens, for a continued run
    if spent.total_tokens:
        cost = spent.cost
        parts.append(f"{spent.total_tokens:,} tokens" + (f" · cost {cost:.6g}" if cost is not None else ""))
    return " · ".join(parts)
