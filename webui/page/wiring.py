"""The page's wiring: which event of which component calls which handler of ChatPage (webui.page.handlers),
with what inputs and outputs, in what order. Long wiring is fine here; anonymous wiring is not.
"""

from typing import Any

import gradio as gr

from webui.chat.engine import ChatApp
from webui.host.host import Host
from webui.page import review_panel
from webui.page.handlers import ChatPage
from webui.page.layout import layout
from webui.page.message_wiring import MessageActions

QUIET: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}


def build_page(demo: Any, host: Host, chat: ChatApp, concurrency: int) -> ChatPage:
    """The page laid out in the open Blocks `demo`, its events wired to its handlers."""
    page = ChatPage(host, chat, concurrency, layout(host))
    PageWiring(page, demo).wire()
    return page


class PageWiring:
    """ChatPage's events, wired once the page is laid out (page.ui)."""

    def __init__(self, page: ChatPage, demo: Any):
        self.page, self.ui, self.demo = page, page.ui, demo
        self.followed = gr.State(False)  # whether the last of them followed one: a run's after-steps

    def wire(self) -> None:
        self._wire_run()
        self._wire_conversations()
        self._wire_settings()
        self._wire_load()

    def _wire_run(self) -> None:
        ui, page = self.ui, self.page
        # Stop shows first, then the request runs (two listeners on one trigger would run in turn).
        finish = (page.after_run, [ui.conv_key, ui.store], [ui.box, ui.stop, ui.store, ui.earlier])
        self.plan_controls = review_panel.ReviewPanel(gr, ui.review, page.chat, page.visitors)
        self.plan_controls.wire(ui.conv_key)
        page.plan_controls = self.plan_controls  # a followed run's busy controls, a reviewed plan's run
        self.refresh = (self.plan_controls.refresh, [ui.conv_key], self.plan_controls.state_outputs)
        self._wire_reviewed(finish)
        busy = [ui.stop, *self.plan_controls.busy_outputs]  # the re-run buttons are disabled meanwhile
        started = ui.box.submit(
            lambda: (gr.Button(visible=True), *self.plan_controls.busy()), None, busy, queue=False, **QUIET
        )
        self.run = started.then(
            # Gradio asks for sign-in routes only when a handler takes a token: off a Space they need a login.
            page.respond_signed_in if page.host.settings.uses_oauth else page.respond,
            [ui.box, *ui.chat_inputs],
            [ui.chatbot, ui.traces, ui.box],
            api_name="chat",
            api_visibility="undocumented",  # callable by gradio_client, but not an MCP tool
            concurrency_limit=page.concurrency,
            show_progress="hidden",
        )
        self.run.then(*finish, **QUIET).then(*self.refresh, **QUIET)
        actions = MessageActions(
            page.host, page.chat, page.visitors, stream=page.streamed, concurrency=page.concurrency
        )
        actions_runs = actions.wire(
            ui.chatbot, [*ui.chat_inputs], [ui.chatbot, ui.traces, ui.box], busy=busy,
            busy_values=lambda: (gr.Button(visible=True), *self.plan_controls.busy()),
            after=[finish, self.refresh],
        )  # fmt: skip
        self.runs = [self.run, *actions_runs]
        ui.chatbot.example_select(page.on_example, None, ui.box, **QUIET)
        ui.stop.click(
            page.on_stop,
            [ui.conv_key],
            None,
            queue=False,
            api_name="stop",
            api_visibility="undocumented",
        )

    def _wire_reviewed(self, finish: tuple[Any, Any, Any]) -> None:
        """A press on the review form (ReviewPanel): the controls hide and Stop shows, the run streams
        into the chat, then the page's and the controls' state follow; the form's state changes
        last only (a change redraws the form)."""
        ui, page, panel = self.ui, self.page, self.plan_controls
        busy = [ui.stop, *panel.busy_outputs]
        begun = lambda: (gr.Button(visible=True), *panel.busy())  # noqa: E731
        started = ui.review.asked.change(begun, None, busy, queue=False, **QUIET)
        inputs = [ui.review.asked, ui.conv_key, *ui.choice_inputs]
        ran = started.then(page.on_review_asked, inputs, [ui.chatbot, ui.traces, ui.box], **QUIET)
        ran.then(*finish, **QUIET).then(*self.refresh, **QUIET)

    def _wire_conversations(self) -> None:
        ui, page, refresh = self.ui, self.page, self.refresh
        switched = [ui.conv_key, ui.chatbot, ui.traces, ui.store, ui.earlier, ui.stop, ui.undo]
        ui.new.click(page.on_new, [ui.conv_key, ui.store], switched, cancels=self.runs, **QUIET).then(
            *refresh, **QUIET
        )
        # A pick, not any input: a change the page makes to the list (after a run, a rename) is no pick.
        picked = ui.earlier.input(
            page.on_pick, [ui.earlier, ui.conv_key, ui.store], switched, cancels=self.runs, **QUIET
        ).then(*refresh, **QUIET)
        self._follow_after(picked)
        # Deleted from the sidebar once confirmed (the chat's own trash icon is hidden: assets/page.css),
        # or by an API client: one way, with its undo.
        gr.on(
            [ui.chatbot.clear, ui.sidebar.really_delete.click],
            page.on_clear,
            [ui.conv_key],
            [ui.conv_key, ui.chatbot, ui.traces, ui.undo, ui.deleted],
            api_name="new_conversation",
            api_visibility="undocumented",
        ).then(page.tidy, [ui.conv_key, ui.store], [ui.store, ui.earlier], **QUIET).then(*refresh, **QUIET)
        ui.undo.click(page.on_undo, [ui.deleted, ui.store], switched, cancels=self.runs, **QUIET).then(
            *refresh, **QUIET
        )
        self._wire_sidebar()
        self.demo.unload(page.on_unload)

    def _wire_sidebar(self) -> None:
        """Rename and delete the open conversation: each opens its own small form, which any other
        step in the sidebar closes."""
        ui, page, bar = self.ui, self.page, self.ui.sidebar
        bar.rename.click(page.ask_rename, [ui.conv_key], [bar.renaming, bar.title], **QUIET)
        gr.on(
            [bar.save_title.click, bar.title.submit],
            page.on_rename,
            [bar.title, ui.conv_key, ui.store],
            [bar.renaming, ui.earlier],
            **QUIET,
        )
        bar.delete.click(page.ask_delete, [ui.conv_key], [bar.confirm, bar.question], **QUIET)
        closing = [ui.new.click, ui.earlier.input, ui.undo.click, bar.really_delete.click, bar.keep.click]
        gr.on(
            [*closing, bar.keep_title.click],
            _closed_forms,
            None,
            [bar.renaming, bar.confirm],
            queue=False,
            **QUIET,
        )

    def _wire_settings(self) -> None:
        ui, page = self.ui, self.page
        inputs, status_outputs = ui.choice_inputs, ui.status_outputs
        for field in (ui.base_url, ui.model, ui.key):  # typed fields: on leaving them, not on every key
            gr.on([field.blur, field.submit], page.show_status, inputs, status_outputs, **QUIET)
        gr.on([ui.top_k.blur, ui.top_k.submit], page.show_status, inputs, status_outputs, **QUIET)
        ui.mode.change(page.show_status, inputs, status_outputs, **QUIET)
        for field in ui.limits:  # kept for the chat in a State; a request checks them (costs.limits)
            field.change(_as_list, ui.limits, ui.limits_state, queue=False, **QUIET)
        remembered = [ui.store, *inputs, ui.keep_key, ui.review.toggle]
        for field in (*inputs, ui.keep_key, ui.review.toggle):  # every field, kept in this browser
            field.change(page.save_settings, remembered, ui.store, queue=False, **QUIET)
        warming = gr.Timer(2.0, active=page.host.backends.warm_state not in ("", "ready"))
        warming.tick(page.follow_warm_up, inputs, [*status_outputs, warming], **QUIET)

    def _wire_load(self) -> None:
        ui, page = self.ui, self.page
        loaded = [ui.conv_key, ui.chatbot, ui.traces, ui.store, ui.earlier, *ui.choice_inputs]
        settings = [ui.keep_key, ui.review.toggle, ui.limits_state, ui.corrected]
        loaded_page = (
            self.demo.load(page.restore, [ui.store], [*loaded, *settings], **QUIET)
            .then(page.show_status, ui.choice_inputs, ui.status_outputs, **QUIET)
            .then(*self.refresh, **QUIET)
        )
        # No Gradio `cancels` stop a follow when the page opens another conversation: cancelling an
        # event the page has not sent yet (a load's chain on a busy server) answers 422. `follow`
        # itself stops once its page shows another conversation (Visitors.shows).
        self._follow_after(loaded_page)

    def _follow_after(self, opened: Any) -> None:
        """After a conversation is shown: a run going on in it is followed until it ends (the page
        then as after a run of its own)."""
        ui, page = self.ui, self.page
        outputs = [ui.chatbot, ui.traces, ui.box, ui.stop, *self.plan_controls.busy_outputs, self.followed]
        # Waits on the event loop, not in a worker: as many pages may follow as there are runs.
        followed = opened.then(page.follow, [ui.conv_key], outputs, concurrency_limit=None, **QUIET)
        after = [self.followed, ui.conv_key, ui.store]
        followed.then(page.after_following, after, [ui.box, ui.stop, ui.store, ui.earlier], **QUIET).then(
            page.refresh_after_following, after[:2], self.plan_controls.state_outputs, **QUIET
        )


def _closed_forms() -> tuple[Any, Any]:
    return gr.Column(visible=False), gr.Column(visible=False)


def _as_list(*values: Any) -> list[Any]:
    return list(values)
