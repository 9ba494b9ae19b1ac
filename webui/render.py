"""Turn the pipeline's events into chat messages, as the plain dicts that gr.Chatbot accepts.

No gradio import here: a message is {"role", "content", "metadata"}; content is markdown text or
{"path": file} for media. Messages with a metadata title show as collapsible boxes ("thoughts"):
status "pending" draws a spinner and keeps the box open, "done" closes it and shows the duration.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from hugginggpt.artifacts import MEDIA_KINDS, Artifact
from hugginggpt.events import (
    AnswerDelta,
    Done,
    Event,
    ModelSelected,
    Outcome,
    PickSource,
    PlanReady,
    PlanRejected,
    Stage,
    StageStarted,
    TaskFailed,
    TaskFinished,
    TaskSkipped,
    TaskStarted,
)
from hugginggpt.plan import RESOURCE_REF, Plan

HUB = "https://huggingface.co/"
# Why a task runs a model the LLM did not pick (the reason says more).
_SOURCE_NOTES = {
    PickSource.NOT_A_CANDIDATE: " (the LLM named no offered model; the top-ranked one runs)",
    PickSource.SELECTION_FAILED: " (model selection failed; the top-ranked one runs)",
}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def model_link(model: str) -> str:
    """Markdown link to the model's Hub page (plain code text for names that cannot be hub ids)."""
    return f"[{model}]({HUB}{model})" if _HUB_ID.match(model) else f"`{model}`"


def plan_markdown(plan: Plan) -> str:
    """A readable numbered list of tasks, their arguments and what each waits for."""
    if not plan.tasks:
        return "No model is needed for this request: answering directly."
    lines = []
    for t in plan.tasks:
        args = ", ".join(f"{name}: {_argument(value)}" for name, value in t.args.items()) or "no arguments"
        after = [d for d in t.dep if d >= 0]
        waits = f" · after task {', '.join(map(str, after))}" if after else " · starts at once"
        lines.append(f"{t.id}. **{t.task}** ({args}){waits}")
    return "\n".join(lines)


def _argument(value: str) -> str:
    text = RESOURCE_REF.sub(lambda m: f"output of task {m.group(1)}", str(value))
    text = text if len(text) <= 80 else text[:77] + "..."
    return f"`{text}`" if text == value and not text.startswith("output of") else f"*{text}*"


class RunView:
    """The chat messages of one request, updated event by event.

    `prefix` keeps message ids unique across the requests of a conversation (nesting uses ids).
    """

    def __init__(self, prefix: str, *, clock: Callable[[], float] = time.monotonic):
        self.prefix = prefix
        self.clock = clock
        self.messages: list[dict[str, Any]] = []
        self.done: Done | None = None
        self._boxes: dict[str, dict[str, Any]] = {}
        self._started: dict[str, float] = {}
        self._answer: dict[str, Any] | None = None

    # ---- boxes (messages with a title) -------------------------------------------------------

    def _box(self, key: str, title: str, content: str = "", *, status: str = "pending") -> dict[str, Any]:
        box = self._boxes.get(key)
        if box is None:
            box = {
                "role": "assistant",
                "content": content,
                "metadata": {"title": title, "id": f"{self.prefix}-{key}", "status": status},
            }
            self._boxes[key] = box
            self._started[key] = self.clock()
            self.messages.append(box)
        return box

    def _close(self, key: str, *, title: str | None = None, seconds: float | None = None) -> None:
        box = self._boxes[key]
        meta = box["metadata"]
        meta["status"] = "done"
        meta["duration"] = round(seconds if seconds is not None else self.clock() - self._started[key], 2)
        if title:
            meta["title"] = title

    def _task_box(self, task_id: int, task: str) -> dict[str, Any]:
        return self._box(f"task{task_id}", f"Task {task_id} · {task} · waiting")

    # ---- events -------------------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        match event:
            case StageStarted(stage=Stage.PLAN):
                self._box("plan", "Planning the tasks")
            case StageStarted(stage=Stage.SELECT):
                self._box("select", "Choosing models")
            case StageStarted(stage=Stage.RESPOND):
                self._answer = {"role": "assistant", "content": ""}
                self.messages.append(self._answer)
            case PlanRejected(attempt=attempt, problems=problems):
                box = self._box("plan", "Planning the tasks")
                note = f"Attempt {attempt} was rejected, asked the LLM to fix: " + "; ".join(problems)
                box["content"] = (box["content"] + "\n\n" + note).strip()
                box["metadata"]["log"] = f"attempt {attempt + 1}"
            case PlanReady(plan=plan, attempts=attempts):
                box = self._box("plan", "Plan")
                box["content"] = plan_markdown(plan)
                n = len(plan.tasks)
                title = f"Plan: {n} task{'s' if n != 1 else ''}" if n else "Plan: no model needed"
                self._close("plan", title=title + (f" (after {attempts} attempts)" if attempts > 1 else ""))
            case ModelSelected(
                task_id=i,
                task=task,
                model=model,
                reason=reason,
                candidates=candidates,
                source=source,
            ):
                if "select" in self._boxes:
                    select = self._boxes["select"]
                    select["content"] = (
                        select["content"] + f"\n- task {i} ({task}): {model_link(model)}"
                    ).strip()
                self._close_select()
                box = self._task_box(i, task)
                box["metadata"]["title"] = f"Task {i} · {task} · {model} · waiting"
                others = [c for c in candidates if c != model]
                box["content"] = (
                    f"Model: {model_link(model)}\n\nWhy: {reason or 'no reason given'}"
                    + _SOURCE_NOTES.get(source, "")
                    + (f"\n\nOther candidates: {', '.join(model_link(c) for c in others)}" if others else "")
                )
            case TaskStarted(task_id=i, task=task, model=model, attempt=attempt):
                self._close_select()
                box = self._task_box(i, task)
                box["metadata"]["title"] = f"Task {i} · {task} · {model} · running"
                if attempt > 1:
                    box["content"] += f"\n\nAttempt {attempt}: trying {model_link(model)}"
                self._started[f"task{i}"] = self.clock()
            case TaskFinished(task_id=i, task=task, model=model, outputs=outputs, seconds=seconds):
                box = self._task_box(i, task)
                text = [_value_text(a) for a in outputs if a.path is None]
                if text:
                    box["content"] += "\n\nResult:\n" + "\n".join(text)
                self._close(f"task{i}", title=f"Task {i} · {task} · {model} · done", seconds=seconds)
                for a in outputs:
                    if a.path is not None and a.kind in MEDIA_KINDS:
                        self.messages.append({"role": "assistant", "content": {"path": str(a.path)}})
            case TaskFailed(task_id=i, task=task, model=model, error=error, final=final, seconds=seconds):
                self._close_select()
                box = self._task_box(i, task)
                who = model_link(model) if model else "the task"
                if not final:
                    box["content"] += f"\n\n{who} failed: {error}; trying the next candidate."
                    box["metadata"]["log"] = "retrying"
                else:
                    box["content"] += f"\n\n**Failed:** {error}"
                    self._close(f"task{i}", title=f"Task {i} · {task} · failed", seconds=seconds or None)
            case TaskSkipped(task_id=i, task=task, reason=reason):
                self._close_select()
                box = self._task_box(i, task)
                box["content"] += f"\n\n**Skipped:** {reason}"
                self._close(f"task{i}", title=f"Task {i} · {task} · skipped")
            case AnswerDelta(text=text):
                if self._answer is None:
                    self.feed(StageStarted(Stage.RESPOND))
                self._answer["content"] += text
            case Done() as done:
                self.done = done
                self._close_pending("stopped" if done.outcome is Outcome.CANCELLED else "not finished")

    def _close_select(self) -> None:
        if "select" in self._boxes and self._boxes["select"]["metadata"]["status"] == "pending":
            self._close("select", title="Models chosen")

    def _close_pending(self, why: str) -> None:
        """At the end no spinner may keep turning."""
        for key, box in self._boxes.items():
            meta = box["metadata"]
            if meta["status"] == "pending":
                title = meta["title"].removesuffix(" · waiting").removesuffix(" · running")
                self._close(key, title=f"{title} · {why}")
        if self._answer is not None and not self._answer["content"]:
            self.messages.remove(self._answer)
            self._answer = None

    def note(self, text: str) -> None:
        """A plain assistant message (errors, hints)."""
        self.messages.append({"role": "assistant", "content": text})


def _value_text(artifact: Artifact) -> str:
    if isinstance(artifact.value, str):
        return artifact.value if len(artifact.value) <= 1500 else artifact.value[:1500] + "..."
    text = json.dumps(artifact.value, ensure_ascii=False, default=str)
    return "```json\n" + (text if len(text) <= 1500 else text[:1500] + "...") + "\n```"
