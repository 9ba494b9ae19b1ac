"""The page's handlers: what Gradio calls on each event, as named methods of ChatPage.

webui.page.layout lays the page out and webui.page.wiring wires its events to these methods
(build_page); app.py builds the app around it.
"""

# No `from __future__ import annotations`: Gradio finds the gr.Request parameters by their annotation.
import asyncio
from pathlib import Path
from typing import Any

import gradio as gr
from gradio import utils as gradio_utils

from webui.chat import titles
from webui.chat.engine import ChatApp, LLMChoice
from webui.chat.files import Publisher
from webui.chat.safe_html import plain
from webui.host.host import Host
from webui.page import message_actions, review_panel, saved
from webui.page.layout import EXAMPLES, Page, example
from webui.page.settings_panel import field_problems, restored, status_for
from webui.page.visitors import Visitors


class ChatPage:
    """The page's handlers as named methods (what Gradio calls on each event), over its laid-out
    components (`ui`). Per visitor it keeps only which conversation each browser session has open."""

    plan_controls: review_panel.ReviewPanel  # set by webui.page.wiring

    def __init__(self, host: Host, chat: ChatApp, concurrency: int, ui: Page):
        self.host, self.chat, self.concurrency, self.ui = host, chat, concurrency, ui
        self.visitors = Visitors(chat)  # which conversation each browser session has open
        self.publisher = Publisher(Path(gradio_utils.get_upload_folder()))

    # ---- who and which conversation --------------------------------------------------------------

    def conversation_key(self, conv_key: str, request: Any) -> str:
        """The browser's conversation key; API clients (no browser store) are keyed by session."""
        return self.visitors.of(conv_key, request)

    def published(self, key: str, messages: list[dict[str, Any]], trace_files: list[str], running: bool):
        """The chat and the traces as the page gets them: the conversation's served copies, and once
        no run goes, the actions under the last message (webui.page.message_actions)."""
        conv = self.chat.find(key)
        if conv is None:  # none yet (its first message makes it): no file of its own to serve
            return messages, []
        if not running:
            messages = message_actions.with_options(messages, message_actions.options(conv))
        return self.publisher.messages(conv, messages), [self.publisher.file(conv, t) for t in trace_files]

    def shown(self, key: str) -> tuple[list[dict[str, Any]], list[str]]:
        conv = self.chat.find(key)
        if conv is None:  # a page load or a new conversation makes nothing until its first message
            return [], []
        return self.published(key, conv.display, conv.traces, conv.cancel is not None)

    def exists(self, key: str) -> bool:
        return self.chat.conversations.title(key) is not None

    def listing(self, store: Any) -> Any:
        """This browser's conversations in the sidebar, the open one marked (none yet: "New
        conversation" is). Their titles stay on the server (ConversationTable.title): the browser
        keeps keys only."""
        listed = self.titled(store)
        current = saved.normal(store)["current"]
        if any(key == current for _, key in listed):
            return gr.Radio(choices=listed, value=current)
        return gr.Radio(choices=[("New conversation", ""), *listed], value="")

    def titled(self, store: Any) -> list[tuple[str, str]]:
        """(title, key) of this browser's conversations that the server has, as the list shows them."""
        named = [(self.chat.conversations.title(key), key) for key in saved.keys(store)]
        return unique_titles([(title, key) for title, key in named if title is not None])

    # ---- a request ---------------------------------------------------------------------------------

    def respond(
        self,
        message: dict[str, Any],
        conv_key,
        base_url,
        model,
        key,
        mode,
        top_k,
        review,
        limits,
        request: gr.Request,
    ):
        the_choice = choice(base_url, model, key, mode, top_k, *(limits or ()))
        yield from self.answer(message, conv_key, the_choice, review, request, None)

    def respond_signed_in(
        self, message: dict[str, Any], conv_key, base_url, model, key, mode, top_k, review, limits,
        request: gr.Request, token: gr.OAuthToken | None,
    ):  # fmt: skip
        the_choice = choice(base_url, model, key, mode, top_k, *(limits or ()))
        yield from self.answer(message, conv_key, the_choice, review, request, token.token if token else None)

    def answer(
        self, message: dict[str, Any], conv_key, the_choice: LLMChoice, review, request: Any, hf_token
    ):
        session = self.conversation_key(conv_key, request)
        updates = self.chat.respond(
            session,
            message,
            the_choice,
            client=self.host.caller(request),
            hf_token=hf_token,
            review=bool(review),
        )
        yield from self.streamed(session, updates)

    def on_review_asked(
        self, request: gr.Request, asked: Any, conv_key, *values: Any
    ):  # the request first: *values
        """What the person pressed on the review form (review_panel.ReviewPanel), with the Settings'
        values (Page.choice_inputs): streamed as a run of the page's own."""
        session = self.conversation_key(conv_key, request)
        yield from self.streamed(session, self.plan_controls.reviewed(session, asked, choice(*values)))

    def streamed(self, session: str, updates: Any):
        """A run's chat updates as the page gets them: (chatbot, traces, message box)."""
        for messages, trace_files, running in updates:
            conv = self.chat.find(session)
            if conv is None:  # refused a conversation (the table is full): the message says why
                yield messages, [], gr.MultimodalTextbox(value=None, interactive=True)
                return
            if conv.ended:  # the conversation ended meanwhile: nothing more is served for it
                return
            yield (
                *self.published(session, messages, trace_files, running),
                gr.MultimodalTextbox(value=None, interactive=not running),
            )

    def after_run(self, conv_key: str, store: Any, request: gr.Request):
        key = self.conversation_key(conv_key, request)
        conv = self.chat.find(key)
        if saved.valid_key(key) and conv is not None and conv.requests:
            store = saved.remember(store, key)  # its title stays on the server (ConversationTable.title)
        return gr.MultimodalTextbox(interactive=True), gr.Button(visible=False), store, self.listing(store)

    def on_example(self, picked: gr.SelectData):
        """A card of the empty chat: its request and its file in the message box, to send or change.
        Read by its index from the app's own list: a page names no file of its own."""
        index = picked.index if isinstance(picked.index, int) else -1
        if not 0 <= index < len(EXAMPLES):
            return gr.skip()
        card = example(*EXAMPLES[index])
        return gr.MultimodalTextbox(value={"text": card["text"], "files": card["files"]})

    def on_stop(self, conv_key: str, request: gr.Request) -> None:
        self.chat.stop(self.conversation_key(conv_key, request))

    # ---- conversations -----------------------------------------------------------------------------

    def on_new(self, conv_key: str, store: Any, request: gr.Request):
        key = saved.new_key()
        self.visitors.opened(session_of(request), key)
        store = saved.open_key(store, key, keep=self.exists)
        hidden = gr.Button(visible=False)
        return key, *self.shown(key), store, self.listing(store), hidden, hidden

    def on_pick(self, picked: str, conv_key: str, store: Any, request: gr.Request):
        if not picked or picked == conv_key or picked not in saved.keys(store):
            # Nothing at all comes back: another event (New conversation) may be switching meanwhile.
            return (gr.skip(),) * 7
        if self.chat.find(picked) is None:  # deleted on the server since
            store = saved.forget(store, picked)
            gr.Info("That conversation is no longer on the server (deleted, or past its retention time).")
            return conv_key, gr.skip(), gr.skip(), store, self.listing(store), gr.skip(), gr.skip()
        return self.opened(picked, store, request)

    def opened(self, key: str, store: Any, request: Any):
        """`key` as the open conversation, remembered by the browser for its next visit."""
        self.visitors.opened(session_of(request), key)
        store = saved.remember(saved.open_key(store, key, keep=self.exists), key)
        hidden = gr.Button(visible=False)
        return key, *self.shown(key), store, self.listing(store), hidden, hidden

    def on_clear(self, conv_key: str, request: gr.Request):
        """The trash icon: this conversation is deleted, its files unreachable at once; a new one
        opens, and "Undo delete" brings the old one back for a while."""
        old = self.conversation_key(conv_key, request)
        title = self.chat.conversations.title(old)
        can_undo = self.chat.reset(old)
        if title is not None:  # said, not silent: what went, and how to bring it back
            gr.Info(f"Deleted “{plain(title)}”." + (" Undo delete brings it back." if can_undo else ""))
        key = saved.new_key() if saved.valid_key(old) else old
        if key != old:
            self.visitors.opened(session_of(request), key)
        return key, [], None, gr.Button(visible=can_undo), old if can_undo else ""

    def on_undo(self, deleted: str, store: Any, request: gr.Request):
        if not saved.valid_key(deleted) or self.chat.conversations.undelete(deleted) is None:
            gr.Info("That conversation can no longer be brought back.")
            return gr.skip(), gr.skip(), gr.skip(), store, gr.skip(), gr.skip(), gr.Button(visible=False)
        return self.opened(deleted, store, request)

    # ---- the sidebar's rename and delete, of the open conversation ----------------------------------

    def ask_rename(self, conv_key: str, request: gr.Request):
        """Rename: the title field, holding the conversation's title; nothing yet to rename: said."""
        title = self.chat.conversations.title(self.conversation_key(conv_key, request))
        if title is None:
            gr.Info("This conversation has no message yet: there is nothing to rename.")
            return gr.skip(), gr.skip()
        return gr.Column(visible=True), gr.Textbox(value=title)

    def on_rename(self, typed: str, conv_key: str, store: Any, request: gr.Request):
        """The new title, kept unique among this browser's conversations; the list shows it."""
        key = self.conversation_key(conv_key, request)
        title = titles.cleaned(typed)
        if not title:
            gr.Warning("A title needs at least one word.")
            return gr.skip(), gr.skip()
        others = [shown for shown, other in self.titled(store) if other != key]
        if not titles.rename(self.chat.conversations, key, titles.unique(title, others)):
            gr.Info("That conversation is no longer on the server.")
        return gr.Column(visible=False), self.listing(store)

    def ask_delete(self, conv_key: str, request: gr.Request):
        """Delete: asked first, naming the conversation that would go."""
        title = self.chat.conversations.title(self.conversation_key(conv_key, request))
        if title is None:
            gr.Info("This conversation has no message yet: there is nothing to delete.")
            return gr.skip(), gr.skip()
        question = f"Delete “{plain(title)}”? Its files go at once; Undo delete brings it back for a while."
        return gr.Column(visible=True), question

    def tidy(self, conv_key: str, store: Any):
        """The browser's list without conversations the server no longer has, the open one current."""
        store = saved.normal(store)
        for key in saved.keys(store):
            if self.chat.find(key) is None:
                store = saved.forget(store, key)
        store = saved.open_key(store, conv_key) if saved.valid_key(conv_key) else store
        return store, self.listing(store)

    def on_unload(self, request: gr.Request) -> None:
        key = self.visitors.left(session_of(request))
        if key is None:  # an API client or a page without a store: its conversation ends with it
            self.chat.drop(session_of(request))
        else:  # its run goes on (webui.chat.live_runs); the conversation stays on disk for the next visit
            self.chat.conversations.leave(key)

    async def follow(self, conv_key: str, request: gr.Request):
        """A run going on in the open conversation (begun before a reload, in another tab, or by a
        page since closed): its chat as it advances, Stop shown and the message box locked meanwhile."""
        session, key = session_of(request), self.conversation_key(conv_key, request)
        run = self.chat.live(key)
        if run is None:  # (a generator that yields nothing would leave the message box unusable)
            yield *(gr.skip(),) * (4 + len(self.plan_controls.busy_outputs)), False
            return
        busy = self.plan_controls.busy()
        async for messages, trace_files, running in run.changes():
            conv = self.chat.find(key)
            if conv is None or conv.ended or not self.visitors.shows(session, key):
                return  # deleted, or the page opened another conversation meanwhile
            yield (
                *await asyncio.to_thread(self.published, key, messages, trace_files, running),  # copies files
                gr.MultimodalTextbox(interactive=not running),
                gr.Button(visible=running),
                *(busy if running else [gr.skip()] * len(busy)),
                True,
            )

    def after_following(self, followed: bool, conv_key: str, store: Any, request: gr.Request):
        """The page as after a run of its own, if `follow` followed one (else as it is: a message
        sent meanwhile has its own steps)."""
        if not followed or self._running_here(conv_key, request):
            return (gr.skip(),) * 4
        return self.after_run(conv_key, store, request)

    def refresh_after_following(self, followed: bool, conv_key: str, request: gr.Request):
        if not followed or self._running_here(conv_key, request):
            return (gr.skip(),) * len(self.plan_controls.state_outputs)
        return self.plan_controls.refresh(conv_key, request)

    def _running_here(self, conv_key: str, request: Any) -> bool:
        """Whether a run goes on in the conversation the page shows now (a follow left early because
        the page opened another one: the page is that one's, whose own run or follow sets it)."""
        return self.chat.live(self.conversation_key(conv_key, request)) is not None

    def restore(self, store: Any, request: gr.Request):
        """A page (re)load: this browser's open conversation and settings, if the server has them.
        It makes no conversation: the first message does."""
        key, store = self.visitors.restored(store, session_of(request))
        v, notes = restored(store["settings"], self.host.settings)
        if notes:  # said where the person looks now, and kept in the Settings panel
            gr.Warning("A saved setting was not valid and was corrected: see Settings.")
        limits = [v["max_model_gb"], v["max_download_gb"], v["licenses"]]
        return (
            key, *self.shown(key), store, self.listing(store),
            v["base_url"], v["model"], v["api_key"], v["mode"], v["top_k"], *limits,  # empty: the server's
            bool(v["api_key"]), v["review"], limits,
            gr.Markdown("\n".join(f"- {plain(n)}" for n in notes), visible=bool(notes)),
        )  # fmt: skip

    # ---- settings ----------------------------------------------------------------------------------

    def show_status(self, base_url, model, key, mode, top_k, *limits):
        c = choice(base_url, model, key, mode, top_k, *limits)
        problems = field_problems(self.host, c)
        fields = [
            gr.Markdown(value=problems.get(name, ""), visible=name in problems) for name in self.ui.problems
        ]
        return status_for(self.host, c, problems), *fields

    def save_settings(
        self, store, base_url, model, key, mode, top_k, max_model, max_download, licences, keep_key, review
    ):
        values = {"base_url": base_url or "", "model": model or "", "mode": mode or "", "top_k": top_k}
        values |= {"max_model_gb": max_model, "max_download_gb": max_download, "licenses": licences or ""}
        values["review"] = bool(review)
        return saved.with_settings(store, values, keep_key=bool(keep_key), api_key=key or "")

    def follow_warm_up(self, base_url, model, key, mode, top_k, *limits):
        """While the runtime warms up, the status line follows it; the timer stops once it is ready."""
        state = self.host.backends.warm_state
        done = state in ("", "ready") or "not available" in state
        return *self.show_status(base_url, model, key, mode, top_k, *limits), gr.Timer(active=not done)


def unique_titles(listed: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(title, key) pairs with no two titles alike: a repeated title gets its number, the list's
    last (the oldest) keeping the bare title ("caption this", "caption this (2)", ...)."""
    taken: set[str] = set()
    out = []
    for title, key in reversed(listed):  # numbered as a rename is (webui.chat.titles.unique)
        shown = titles.unique(title, taken)
        taken.add(shown)
        out.append((shown, key))
    return out[::-1]


def choice(base_url: str, model: str, key: str, mode: str, top_k: float | None, *limits: Any) -> LLMChoice:
    """`limits`: the largest model, the most to download, the licences (Page.limits)."""
    max_model, max_download, licences = (*limits, None, None, None)[:3]
    return LLMChoice(
        base_url or "", model or "", key or "", mode or "", top_k, max_model, max_download, licences or ""
    )


def session_of(request: Any) -> str:
    return getattr(request, "session_hash", None) or "local"
