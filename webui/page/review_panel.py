"""The page's plan controls under the chat: the review toggle, the review form (drawn anew by
gr.render whenever the form state changes) and the "run a trace again" upload. Regenerating and
editing the last plan are actions on the chat's messages (page.message_actions, wired in page.wiring).
webui.chat.review_chat does the work.
"""

# No `from __future__ import annotations`: Gradio finds the gr.Request parameters by their annotation.
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio

from webui.chat import review_chat
from webui.chat.engine import ChatApp
from webui.chat.safe_html import plain

QUIET = {"api_visibility": "private", "show_progress": "hidden"}


@dataclass
class ReviewControls:
    toggle: Any  # gr.Checkbox: plan, then wait for the person
    form: Any  # gr.State: the form of the plan under review (review_form.form_for), None when none
    trace: Any  # gr.UploadButton
    area: Any  # gr.Column where the form and the buttons are drawn


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
    return ReviewControls(toggle, gr.State(None), trace, area)


class Wiring:
    """Wires the controls. `show(session, messages, traces, running)` publishes a chat update (the chatbot's
    and the traces' values); `run_outputs` are [chatbot, traces, box]; `before_run`/`after_run` are
    the app's own steps around a run (the Stop button, the browser's list of conversations)."""

    def __init__(
        self,
        gr: Any,
        controls: ReviewControls,
        chat: ChatApp,
        *,
        session_of: Callable[[str, Any], str],
        conv_key: Any,
        choice_inputs: list[Any],
        choice: Callable[..., Any],
        show: Callable[[str, list[dict[str, Any]], list[str], bool], tuple[Any, Any]],
        run_outputs: list[Any],
        before_run: tuple[Callable[..., Any], Any, Any],  # (fn, inputs, outputs) as Gradio takes them
        after_run: tuple[Callable[..., Any], list[Any], list[Any]],
    ):
        self.gr, self.controls, self.chat = gr, controls, chat
        self.session_of, self.conv_key, self.choice_inputs, self.choice = (
            session_of,
            conv_key,
            choice_inputs,
            choice,
        )
        self.show, self.run_outputs, self.before_run, self.after_run = (
            show,
            run_outputs,
            before_run,
            after_run,
        )
        self.state_outputs = [controls.form, controls.area, controls.trace]
        # What a run disables while it goes (a click would do nothing): the trace upload, and the
        # form's area hides (a redrawn button would drop its pending steps).
        self.busy_outputs = [controls.trace, controls.area]
        self.refresh = self._refresh_fn()

    def wire(self) -> None:
        gr, controls = self.gr, self.controls
        controls.trace.upload(self._on_trace(), [controls.trace, self.conv_key], self.state_outputs, **QUIET)
        with controls.area:

            @gr.render(inputs=[controls.form])
            def draw(form: Any):
                if form:
                    self._draw_form(form)

    def busy(self) -> tuple[Any, Any]:
        """For `busy_outputs` as a run starts; `refresh` undoes it when the run has ended."""
        return self.gr.UploadButton(interactive=False), self.gr.Column(visible=False)

    # ---- handlers (made here so that Gradio sees their gr.Request annotation) ---------------------

    def _refresh_fn(self):
        gr, chat, session_of = self.gr, self.chat, self.session_of

        def refresh(key: str, request: gradio.Request):
            """The pending plan's form, if any, and the controls usable again."""
            form = review_chat.pending_form(chat, session_of(key, request))
            return form, gr.Column(visible=True), gr.UploadButton(interactive=True)

        return refresh

    def _on_trace(self):
        gr, chat, session_of = self.gr, self.chat, self.session_of

        def on_trace(path: str, key: str, request: gradio.Request):
            form, problem = review_chat.open_trace(
                chat, session_of(key, request), path, client=chat.host.caller(request)
            )
            if problem:
                gr.Warning(problem)
                return (gr.skip(),) * 3
            return form, gr.Column(visible=True), gr.skip()

        return on_trace

    def _streamed(self, session: str, updates):
        for messages, traces, running in updates:
            chatbot, files = self.show(session, messages, traces, running)
            yield chatbot, files, self.gr.MultimodalTextbox(interactive=not running)

    def _chained(self, trigger, fn, inputs) -> None:
        """A run from a button drawn by gr.render: the controls hide and Stop shows, the run streams
        into the chat, then the app's and the controls' state follow. The form's state changes last
        only: a change redraws the form, and Gradio drops a redrawn button's pending steps."""
        show_stop, _, stop = self.before_run

        def started():
            return show_stop(), *self.busy()

        begun = trigger(started, None, [stop, *self.busy_outputs], queue=False, **QUIET)
        ran = begun.then(fn, inputs, self.run_outputs, **QUIET)
        ran.then(*self.after_run, **QUIET).then(self.refresh, [self.conv_key], self.state_outputs, **QUIET)

    # ---- drawn by gr.render ------------------------------------------------------------------------

    def _draw_form(self, form: dict[str, Any]) -> None:
        gr, chat, session_of, choice = self.gr, self.chat, self.session_of, self.choice
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
        n_choice = len(self.choice_inputs)

        def on_run(request: gradio.Request, shown: Any, key: str, *values: Any):  # the request first: *values
            session = session_of(key, request)
            reviewed = review_chat.run_reviewed(
                chat, session, shown, values[n_choice:], choice(*values[:n_choice])
            )
            yield from self._streamed(session, reviewed)

        def on_cancel(key: str, request: gradio.Request):
            session = session_of(key, request)
            messages = review_chat.cancel_review(chat, session)
            conv = chat.conversations.find(session)
            return self.show(session, messages, conv.traces if conv else [], False)[0]

        self._chained(run.click, on_run, [self.controls.form, self.conv_key, *self.choice_inputs, *fields])
        cancel.click(on_cancel, [self.conv_key], [self.run_outputs[0]], **QUIET).then(
            self.refresh, [self.conv_key], self.state_outputs, **QUIET
        )


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
