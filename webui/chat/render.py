"""Turn the pipeline's events into chat messages, as the plain dicts that gr.Chatbot accepts.

No gradio import here: a message is {"role", "content", "metadata"}; content is markdown text,
{"path": file, "alt_text": ...} for media, or a list of both. A message with a metadata title
shows as a collapsible box; `parent_id` nests it in the box with that id; status "pending" draws a
spinner and keeps the box open, "done" closes it.

One request is one assistant turn: a "work" box that nests the plan (a diagram and a list), which
nests one box per task; under the work box each image, clip or video with a caption naming the
task that made it; then the answer. When the request ends the work box folds to one summary line.
Everything the LLM, a model or a plan wrote passes through webui.chat.safe_html first; the words and
marks themselves are webui.chat.render_text's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from hugginggpt.files.artifacts import MEDIA_KINDS, Artifact, ArtifactKind
from hugginggpt.run.events import (
    AnswerDelta,
    Done,
    Estimated,
    Event,
    ModelSelected,
    Outcome,
    PlanReady,
    PlanRejected,
    Stage,
    StageStarted,
    TaskDropped,
    TaskFailed,
    TaskFinished,
    TaskPlanned,
    TaskProgress,
    TaskSkipped,
    TaskStarted,
)
from hugginggpt.run.task_progress import words
from hugginggpt.stages.plan import RESOURCE_REF, Plan
from webui.chat.plan_graph import plan_mermaid
from webui.chat.render_text import (
    ANNOTATES,
    SOURCE_NOTES,
    add_text,
    model_link,
    plan_markdown,
    shortened,
    state_badge,
    summary_line,
    user_messages,
    value_text,
)
from webui.chat.safe_html import clean, plain

__all__ = ["RunView", "model_link", "plan_markdown", "user_messages"]  # as before the split
REASON_CHARS = 90  # a failed or skipped task's reason on its folded line; its box says it whole


class RunView:
    """The chat messages of one request, updated event by event. `prefix` keeps message ids unique
    across the requests of a conversation (nesting uses ids)."""

    def __init__(
        self,
        prefix: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        off_hub: Callable[[str], bool] = lambda model: False,
    ):
        self.prefix = prefix
        self.clock = clock
        self.off_hub = off_hub  # a model loaded from a local folder: its name has no Hub page
        self.started = clock()
        self.messages: list[dict[str, Any]] = []
        self.done: Done | None = None
        self.plan: Plan | None = None
        self.rejections: list[tuple[int, list[str]]] = []
        self.states: dict[int, str] = {}
        self.models: dict[int, str] = {}
        self.estimates: dict[int, str] = {}  # task id -> its model's estimate, in a few words
        self.reasons: dict[str, int] = {}  # why a model was picked -> the first task it was said for
        self.estimated_seconds: dict[int, float | None] = {}
        self.texts: dict[int, str] = {}  # each task's text output, to name what a later task used
        self.cached: set[int] = set()  # tasks served from the result cache
        self.resumed: set[int] = set()  # tasks that finished before a crash (hugginggpt.run.resume)
        self.names: dict[int, str] = {}  # each task's type
        self.why_not: dict[int, str] = {}  # why a task failed or was skipped, said on its folded line
        self._tasks: dict[int, dict[str, Any]] = {}
        self._media_of: dict[int, list[dict[str, Any]]] = {}  # each task's media messages
        self._task_started: dict[int, float] = {}
        self._answer: dict[str, Any] | None = None
        self._answer_text = ""  # as the LLM wrote it; the message shows it cleaned
        self.work = self._node("work", "Working · planning the tasks")
        self.plan_box: dict[str, Any] | None = None
        self._whole = False  # the plan is whole (PlanReady): drawn from then on

    # ---- boxes --------------------------------------------------------------------------------

    def _node(self, key: str, title: str, *, parent: str | None = None, content: Any = "") -> dict[str, Any]:
        meta = {"title": title, "id": f"{self.prefix}-{key}", "status": "pending"}
        if parent:
            meta["parent_id"] = f"{self.prefix}-{parent}"
        node = {"role": "assistant", "content": content, "metadata": meta}
        self.messages.append(node)
        return node

    @staticmethod
    def _close(node: dict[str, Any], title: str | None = None, seconds: float | None = None) -> None:
        meta = node["metadata"]
        meta["status"] = "done"
        meta.pop("log", None)  # a "retrying" note must not outlive the retry
        if seconds is not None:
            meta["duration"] = round(seconds, 2)
        if title:
            meta["title"] = title

    def _link(self, model: str) -> str:
        return f"`{plain(model)}` (a local model)" if self.off_hub(model) else model_link(model)

    def _stage(self, words: str) -> None:
        self.work["metadata"]["title"] = f"Working · {words}"

    def _plan_box(self) -> dict[str, Any]:
        if self.plan_box is None:
            self.plan_box = self._node("plan", "Planning the tasks", parent="work")
        return self.plan_box

    def _refresh_plan(self) -> None:
        """The diagram, the list and every rejected attempt, in the plan's box."""
        parts = []
        if self.plan is not None:
            # The drawing changes twice only: once the plan is whole (not while the LLM still writes
            # it, task by task), and as the run ends. Gradio's chat draws a changed diagram again,
            # and one replaced while Mermaid draws it throws in the browser. The list below it fills
            # in as the plan is written and follows every state as it happens.
            drawn = (self.states, self.models, self.estimates) if self.done else ({}, {}, {})
            parts += [
                plan_mermaid(self.plan, *drawn) if self._whole or self.done else "",
                plan_markdown(self.plan, self.states, self.estimates),
            ]
        if self.rejections:
            parts.append(
                "**Rejected plans** (each sent back to the LLM to fix):\n"
                + "\n".join(f"- attempt {n}: " + clean("; ".join(p)) for n, p in self.rejections)
            )
        self._plan_box()["content"] = "\n\n".join(p for p in parts if p)

    def _task_title(self, i: int, task: str) -> str:
        """One line that says it all once the box folds: the task, its model, its state (a failed or
        skipped one with why), how it got its outputs; Gradio adds the time it took."""
        model = self.models.get(i)
        state = self.states.get(i, "waiting")
        why = self.why_not.get(i, "") if state in ("failed", "skipped") else ""
        badge = state_badge(state) + (f" — {plain(shortened(why, REASON_CHARS))}" if why else "")
        return " · ".join(
            x for x in (f"Task {i}", plain(task), plain(model) if model else "", badge, self._served(i)) if x
        )

    def _set_state(self, i: int, task: str, state: str, *, seconds: float | None = None) -> dict[str, Any]:
        self.states[i] = state
        self.names[i] = task
        node = self._tasks.get(i)
        if node is None:
            node = self._tasks[i] = self._node(f"task{i}", "", parent="plan")
        node["metadata"]["title"] = self._task_title(i, task)
        if state in ("waiting", "running"):
            node["metadata"]["status"] = "pending" if state == "running" else "done"
        else:
            self._close(node, seconds=seconds)
        self._refresh_plan()
        return node

    # ---- events -------------------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        match event:
            case StageStarted(stage=Stage.PLAN):
                self._stage("planning the tasks")
                self._plan_box()
            case StageStarted(stage=Stage.SELECT):
                self._stage("choosing models")
            case StageStarted(stage=Stage.EXECUTE):
                self._stage("running the tasks")
            case StageStarted(stage=Stage.RESPOND):
                self._stage("writing the answer")
                if self.plan_box is not None and self.plan_box["metadata"]["status"] == "pending":
                    self._close(self.plan_box)
                self._answer = {"role": "assistant", "content": ""}
                self.messages.append(self._answer)
            case PlanRejected(attempt=attempt, problems=problems):
                self.rejections.append((attempt, list(problems)))
                self._plan_box()["metadata"]["log"] = f"attempt {attempt} rejected"
                self._refresh_plan()
            case PlanReady():
                self._plan_ready(event)
            case TaskPlanned(task=t):  # the plan fills in task by task as the LLM writes it
                self.plan = Plan([*(self.plan.tasks if self.plan else []), t])
                self._plan_box()["metadata"]["title"] = f"Planning the tasks · {len(self.plan.tasks)} so far"
                self._set_state(t.id, t.task, "waiting")
            case TaskDropped(task_id=i):
                self._forget(i)
            case ModelSelected():
                self._selected(event)
            case Estimated():
                self._estimated(event)
            case TaskStarted(task_id=i, task=task, model=model, attempt=attempt):
                self.models[i] = model
                node = self._set_state(i, task, "running")
                if attempt > 1:
                    add_text(node, f"Attempt {attempt}: trying {self._link(model)}")
                self._task_started[i] = self.clock()
            case TaskProgress(task_id=i) as progress:  # the box's log line, until the task ends
                box = self._tasks.get(i)
                if box is not None and self.states.get(i) == "running":
                    box["metadata"]["log"] = plain(words(progress))
            case TaskFinished():
                self._finished(event)
            case TaskFailed(task_id=i, task=task, model=model, error=error, final=final, seconds=seconds):
                who = self._link(model) if model else "the task"
                if not final:
                    node = self._set_state(i, task, "running")
                    add_text(node, f"{who} failed: {clean(error)}; trying the next candidate.")
                    node["metadata"]["log"] = "retrying with another model"
                else:
                    self.why_not[i] = error
                    node = self._set_state(i, task, "failed", seconds=seconds or None)
                    add_text(node, f"**Failed:** {clean(error)}")
            case TaskSkipped(task_id=i, task=task, reason=reason):
                self.why_not[i] = reason
                node = self._set_state(i, task, "skipped")
                add_text(node, f"**Skipped:** {clean(reason)}")
            case AnswerDelta(text=text):
                if self._answer is None:
                    self.feed(StageStarted(Stage.RESPOND))
                self._answer_text += text
                assert self._answer is not None  # the respond stage made it
                self._answer["content"] = clean(self._answer_text)
            case Done() as done:
                self._end(done)

    def _plan_ready(self, event: PlanReady) -> None:
        plan, attempts = event.plan, event.attempts
        self.plan = plan
        self._whole = True
        box = self._plan_box()
        box["metadata"].pop("log", None)
        n = len(plan.tasks)
        title = f"Plan: {n} task{'s' if n != 1 else ''}" if n else "Plan: no model needed"
        box["metadata"]["title"] = title + (f" (after {attempts} attempts)" if attempts > 1 else "")
        for t in plan.tasks:
            if t.id not in self.states:  # tasks started from the streamed plan keep their state
                self._set_state(t.id, t.task, "waiting")
        self._refresh_plan()
        if not n:
            self._close(box)

    def _selected(self, event: ModelSelected) -> None:
        i, model = event.task_id, event.model
        self.models[i] = model
        others = [c for c in event.candidates if c != model]
        node = self._set_state(i, event.task, "waiting")
        why = (clean(event.reason) or "no reason given") + SOURCE_NOTES.get(event.source, "")
        first = self.reasons.setdefault(why, i)  # a reason said for an earlier task is not said again
        node["content"] = (
            f"Model: {self._link(model)}\n\nWhy: {why if first == i else f'as for task {first}'}"
            + (f"\n\nOther candidates: {', '.join(self._link(c) for c in others)}" if others else "")
        )

    def _estimated(self, event: Estimated) -> None:
        i, estimate = event.task_id, event.estimate
        self.estimates[i] = estimate.short()
        self.estimated_seconds[i] = estimate.seconds
        node = self._set_state(i, event.task, "waiting")
        add_text(node, f"Estimate: {plain(estimate.line())}")
        if event.excluded:
            left_out = "; ".join(plain(f"{e.id} ({e.why})") for e in event.excluded)
            add_text(node, "Left out by your limits: " + left_out)

    def _forget(self, i: int) -> None:
        """A task the plan that counts does not have: its box and outputs leave the turn."""
        gone = [id(m) for m in (self._tasks.pop(i, None), *self._media_of.pop(i, [])) if m is not None]
        self.messages[:] = [m for m in self.messages if id(m) not in gone]  # by identity: dicts may be equal
        for known in (self.states, self.names, self.models, self.texts, self.why_not, self._task_started):
            known.pop(i, None)
        self.cached.discard(i)
        if self.plan is not None:
            self.plan = Plan([t for t in self.plan.tasks if t.id != i])
        self._refresh_plan()

    def _finished(self, event: TaskFinished) -> None:
        i, task, model, outputs = event.task_id, event.task, event.model, event.outputs
        seconds = event.seconds
        self.models[i] = model
        if event.cached:
            self.cached.add(i)
        if event.resumed:
            self.resumed.add(i)
        text = [value_text(a) for a in outputs if a.path is None]
        self.texts[i] = next((a.value for a in outputs if a.kind == ArtifactKind.TEXT), "")
        node = self._set_state(i, task, "done", seconds=seconds)
        guess = self.estimated_seconds.get(i)
        if guess is not None and not event.cached:  # the estimate beside what it took
            add_text(node, f"Took {seconds:.2f} s; the estimate was {guess:.2g} s.")
        if text:
            add_text(node, "Result:\n" + "\n".join(text))
        for a in outputs:
            if a.path is not None and a.kind in MEDIA_KINDS:
                media = self._media(i, task, model, a, outputs, seconds)
                self.messages.append(media)
                self._media_of.setdefault(i, []).append(media)

    def _served(self, i: int) -> str:
        """How a task that ran no model got its outputs; "" for one that ran."""
        if i in self.resumed:
            return "from before the restart"
        return "from the cache" if i in self.cached else ""

    def _media(self, i: int, task: str, model: str, a: Artifact, outputs: list[Artifact], seconds: float):
        took = self._served(i) or f"{seconds:.1f} s"
        caption = f"*Task {i} · {plain(task)} · {plain(model)} · {took}*"
        source = self._arg(i, "image")
        if task in ANNOTATES and source:
            what, none = ANNOTATES[task]
            found = self.texts.get(i) or next((none for x in outputs if x.kind == "data" and not x.value), "")
            caption += f" — {what} {plain(source)}" + (f": {shortened(clean(found), 160)}" if found else "")
        prompt = self._arg(i, "text") or self._arg(i, "prompt")
        if prompt and task not in ANNOTATES:  # said in the caption too: Gradio 6.31 drops alt_text
            caption += f" — from “{plain(shortened(prompt, 120))}”"
        alt = f"Task {i} ({task})" + (f": {shortened(prompt, 200)}" if prompt else "")
        return {"role": "assistant", "content": [caption, {"path": str(a.path), "alt_text": plain(alt)}]}

    def _arg(self, i: int, name: str) -> str:
        """A task's argument as the task saw it: a reference to another task's text becomes that text."""
        task = self.plan.by_id().get(i) if self.plan else None
        value = str(task.args.get(name, "")) if task else ""

        def resolve(m: re.Match[str]) -> str:
            n = int(m.group(1))
            return self.texts.get(n) or f"the output of task {n}"

        return RESOURCE_REF.sub(resolve, value)

    def _end(self, done: Done) -> None:
        """No spinner may keep turning: unfinished tasks are stopped (or not finished), the work folds."""
        self.done = done
        by_record = {r.id: str(r.status) for r in done.records}
        for r in done.records:  # a task that ended without its own event still says why on its line
            if r.error and str(r.status) in ("failed", "skipped"):
                self.why_not.setdefault(r.id, r.error)
        leftover = "stopped" if done.outcome is Outcome.CANCELLED else "not finished"
        for i in list(self._tasks):
            if done.outcome is Outcome.PLANNED:  # nothing ran yet: the tasks wait for the person
                continue
            if self.states.get(i) in ("waiting", "running"):
                new = by_record.get(i, leftover)
                self._set_state(i, self.names[i], new if new != "pending" else leftover)
        for r in done.records:  # what each task took replaces what it was estimated to take
            if str(r.status) in ("done", "failed") and r.id in self.estimates:
                self.estimates[r.id] = "from the cache" if r.cached else f"took {r.seconds:.2g} s"
        if self.plan_box is not None:
            self._refresh_plan()  # the drawing with the final states
            if self.plan is None and self.rejections:
                n = len(self.rejections)
                self.plan_box["metadata"]["title"] = (
                    f"No valid plan: rejected {n} time{'s' if n != 1 else ''}"
                )
            self._close(self.plan_box)
        seconds = f"{self.clock() - self.started:.1f} s"
        self._close(self.work, title=summary_line(done, seconds, self.plan, self.states, self.models))
        if done.trace_file:  # last inside the work box; the answer and any note stay last in the turn
            nested = [n for n, m in enumerate(self.messages) if (m.get("metadata") or {}).get("parent_id")]
            self.messages.insert(
                nested[-1] + 1 if nested else 1,
                {
                    "role": "assistant",
                    "content": {"path": str(done.trace_file)},
                    "metadata": {"title": "Trace of this request (JSON)", "parent_id": f"{self.prefix}-work"},
                },
            )
        if self._answer is not None and not self._answer["content"]:
            self.messages.remove(self._answer)
            self._answer = None

    def note(self, text: str) -> None:
        """A plain assistant message (errors, hints)."""
        self.messages.append({"role": "assistant", "content": clean(text)})
