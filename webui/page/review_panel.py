"""The page's plan controls under the chat: the review toggle, the review form (drawn anew by
gr.render whenever the form state changes) and the "run a trace again" upload. Regenerating and
editing the last plan are actions on the chat's messages (page.message_actions, wired in page.wiring).
webui.chat.review_chat does the work; webui.page.wiring wires a reviewed plan's run like the page's others.
"""

# No `from __future__ import annotations`: Gradio finds the gr.Request parameters by their annotation.
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import gradio

from webui.chat import review_chat
from webui.chat.engine import ChatApp, LLMChoice
from webui.chat.live_runs import Update
from webui.chat.safe_html import plain
from webui.page.visitors import Visitors

QUIET = {"api_visibility": "private", "show_progress": "hidden"}


@dataclass
class ReviewControls:
    toggle: Any  # gr.Checkbox: plan, then wait for the person
    form: Any  # gr.State: the form of the plan under review (review_form.form_for), None when none
    trace: Any  # gr.UploadButton
    area: Any  # gr.Column where the form and the buttons are drawn
    asked: Any  # gr.State: what the person pressed on the drawn form last (ReviewPanel.reviewed)


def layout(gr: Any, review_default: bool) -> ReviewControls:
    with gr.Row(elem_id="plan-controls"):
        toggle = gr.Checkbox(
            label="Review the plan before it runs",
            value=review_default,
            scale=0,
            min_width=260,
            elem_id="review-toggle",
        )
        trace = gr.UploadButton(
            "Run a trace again…", file_types=[".json"], size="sm", scale=0, elem_id="run-trace"
        )
    area = gr.Column(elem_id="review-area")
    return ReviewControls(toggle, gr.State(None), trace, area, gr.State(None))


class ReviewPanel:
    """The controls' own events, over the chat engine (webui.chat.review_chat) and the page's
    visitors (whose conversation a request is about). It calls nothing of the page: the buttons it
    draws only record what the person asked in `controls.asked`, whose change the page wires to a
    run like its other runs (webui.page.wiring), with `reviewed` as that run's updates."""

    def __init__(self, gr: Any, controls: ReviewControls, chat: ChatApp, visitors: Visitors):
        self.gr, self.controls, self.chat, self.visitors = gr, controls, chat, visitors
        self.state_outputs = [controls.form, controls.area, controls.trace]
        # What a run disables while it goes (a click would do nothing): the trace upload, and the
        # form's area hides (a redrawn button would drop its pending steps).
        self.busy_outputs = [controls.trace, controls.area]
        self.refresh = self._refresh_fn()

    def wire(self, conv_key: Any) -> None:
        """The trace upload, and the form drawn anew whenever its state changes."""
        gr, controls = self.gr, self.controls
        controls.trace.upload(self._on_trace(), [controls.trace, conv_key], self.state_outputs, **QUIET)
        with controls.area:

            @gr.render(inputs=[controls.form])
            def draw(form: Any):
                if form:
                    self._draw_form(form)

    def busy(self) -> tuple[Any, Any]:
        """For `busy_outputs` as a run starts; `refresh` undoes it when the run has ended."""
        return self.gr.UploadButton(interactive=False), self.gr.Column(visible=False)

    def reviewed(self, session: str, asked: Any, choice: LLMChoice) -> Iterator[Update]:
        """The chat's updates for what the person asked on the form: its plan run as the fields
        leave it (or the form back with its problems), or the review cancelled."""
        if not isinstance(asked, dict) or asked.get("act") not in ("run", "cancel"):
            return iter(())
        if asked["act"] == "cancel":
            conv = self.chat.find(session)
            traces = conv.traces if conv else []
            return iter([(review_chat.cancel_review(self.chat, session), traces, False)])
        return review_chat.run_reviewed(self.chat, session, asked["form"], asked["values"], choice)

    # ---- handlers (made here so that Gradio sees their gr.Request annotation) ---------------------

    def _refresh_fn(self):
        gr, chat, visitors = self.gr, self.chat, self.visitors

        def refresh(key: str, request: gradio.Request):
            """The pending plan's form, if any, and the controls usable again."""
            form = review_chat.pending_form(chat, visitors.of(key, request))
            return form, gr.Column(visible=True), gr.UploadButton(interactive=True)

        return refresh

    def _on_trace(self):
        gr, chat, visitors = self.gr, self.chat, self.visitors

        def on_trace(path: str, key: str, request: gradio.Request):
            form, problem = review_chat.open_trace(
                chat, visitors.of(key, request), path, client=chat.host.caller(request)
            )
            if problem:
                gr.Warning(problem)
                return (gr.skip(),) * 3
            return form, gr.Column(visible=True), gr.skip()

        return on_trace

    # ---- drawn by gr.render ------------------------------------------------------------------------

    def _draw_form(self, form: dict[str, Any]) -> None:
        gr, controls = self.gr, self.controls
        fields: list[Any] = []
        with gr.Group(elem_id="review-form"):
            gr.Markdown("### Review the plan" + (f"\n{form['notice']}" if form.get("notice") else ""))
            if form.get("problems"):
                gr.Markdown(
                    _problems(form["problems"]), elem_classes="field-problem", elem_id="review-problems"
                )
            for t in form["tasks"]:
                fields += _task_fields(gr, t)
            with gr.Row():
                run = gr.Button("Run plan", variant="primary", scale=0, elem_id="review-run")
                cancel = gr.Button("Cancel", scale=0, elem_id="review-cancel")

        # Only recorded here: the run hangs off `asked`, which no redraw replaces (Gradio drops a
        # redrawn button's pending steps). A fresh id each press, so that the same press twice runs twice.
        def on_run(shown: Any, *values: Any) -> dict[str, Any]:
            return {"act": "run", "form": shown, "values": list(values), "id": uuid.uuid4().hex}

        def on_cancel() -> dict[str, Any]:
            return {"act": "cancel", "id": uuid.uuid4().hex}

        run.click(on_run, [controls.form, *fields], controls.asked, **QUIET)
        cancel.click(on_cancel, None, controls.asked, **QUIET)


def _task_fields(gr: Any, t: dict[str, Any]) -> list[Any]:
    """One task's fields in review_form.field_names order, its problems under them."""
    i = t["id"]
    gr.Markdown(f"**Task {i} · {plain(t['task'])}**", elem_id=f"review-task-{i}")  # a trace's words
    if t.get("estimate"):  # estimate.py: download, memory, seconds, cost; candidates a limit left out
        gr.Markdown(_problems(t["estimate"].splitlines()), elem_id=f"review-estimate-{i}")
    with gr.Row():
        fields = [
            gr.Dropdown(
                choices=t["candidates"],
                value=t["model"] or None,
                allow_custom_value=True,
                label="Model",
                interactive=True,  # Gradio does not see inputs of a chained step as editable
                elem_id=f"review-model-{i}",
            ),
            gr.Textbox(t["dep"], label="Runs after tasks", interactive=True, elem_id=f"review-dep-{i}"),
            gr.Textbox(
                t["seed"], label="Seed", visible=bool(t["seed"]), interactive=True, elem_id=f"review-seed-{i}"
            ),
            gr.Checkbox(
                t["delete"], label="Delete this task", interactive=True, elem_id=f"review-delete-{i}"
            ),
        ]
    for name, value in t["args"].items():
        fields.append(
            gr.Textbox(
                value, label=name, lines=1, max_lines=6, interactive=True, elem_id=f"review-arg-{i}-{name}"
            )
        )
    if t["problems"]:
        gr.Markdown(_problems(t["problems"]), elem_classes="field-problem", elem_id=f"review-problems-{i}")
    return fields


def _problems(problems: list[str]) -> str:
    """The validator's words: they quote the plan (`<resource>-0`, file names), so as visible text."""
    return "\n".join(f"- {plain(p)}" for p in problems)
