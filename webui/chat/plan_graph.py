"""The plan as a picture: a Mermaid flowchart, which Gradio's chat markdown draws from a ```mermaid
fence (it bundles mermaid.js, run at security level "antiscript"). Tasks are boxes with their type
and model, coloured by the state each ended in; an arrow runs from each task to the tasks that need
its output.

Only a small set of characters from task names and model ids reaches the diagram's source, so
nothing the LLM wrote can change the diagram's syntax or add markup to it.
"""

from __future__ import annotations

import re

from hugginggpt.stages.plan import Plan

# state: (fill, stroke, text colour, word shown in the box)
STYLES = {
    "planned": ("#f9fafb", "#6b7280", "#111827", ""),  # drawn before the run: the list shows states
    "waiting": ("#f3f4f6", "#9ca3af", "#374151", "waiting"),
    "running": ("#dbeafe", "#2563eb", "#1e3a8a", "running"),
    "done": ("#dcfce7", "#16a34a", "#14532d", "done"),
    "failed": ("#fee2e2", "#dc2626", "#7f1d1d", "failed"),
    "skipped": ("#fef9c3", "#ca8a04", "#713f12", "skipped"),
    "stopped": ("#e5e7eb", "#4b5563", "#111827", "stopped"),
    "not finished": ("#e5e7eb", "#4b5563", "#111827", "not run"),  # the run failed before it (a limit)
}
_UNSAFE = re.compile(r"[^\w./ :+-]")
MAX_TASKS = 40  # a larger plan is listed as text only: a huge diagram helps nobody


def label(text: str, limit: int = 40) -> str:
    text = _UNSAFE.sub("", str(text)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plan_mermaid(
    plan: Plan, states: dict[int, str], models: dict[int, str], estimates: dict[int, str] | None = None
) -> str:
    """A fenced ```mermaid block; '' when there is nothing (or too much) to draw. `estimates`: what
    each task's model is estimated to take, in a few words."""
    if not plan.tasks or len(plan.tasks) > MAX_TASKS:
        return ""
    # Drawn at its own size, never shrunk to the bubble (on a phone the bubble scrolls sideways:
    # assets/page.css); top-down keeps it narrow.
    lines = ["```mermaid", '%%{init: {"flowchart": {"useMaxWidth": false}}}%%', "flowchart TD"]
    for t in plan.tasks:
        state = states.get(t.id, "planned")
        state = state if state in STYLES else "planned"
        model = models.get(t.id)
        estimate = (estimates or {}).get(t.id)
        parts = [f"{t.id} · {label(t.task)}", label(model) if model else "", STYLES[state][3]]
        parts.insert(2, label(estimate, 60) if estimate else "")
        lines.append(f'  t{t.id}["{"<br/>".join(p for p in parts if p)}"]:::{_class(state)}')
    ids = {t.id for t in plan.tasks}
    for t in plan.tasks:
        for d in dict.fromkeys(t.dep):
            if d in ids and d != t.id:
                lines.append(f"  t{d} --> t{t.id}")
    for state, (fill, stroke, colour, _) in STYLES.items():
        style = f"fill:{fill},stroke:{stroke},color:{colour},stroke-width:2px"
        lines.append(f"  classDef {_class(state)} {style}")
    lines.append("```")
    return "\n".join(lines)


def _class(state: str) -> str:
    return state.replace(" ", "_")  # a class name has no spaces
