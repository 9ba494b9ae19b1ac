"""HuggingGPT in the browser: `python app.py`, also the Hugging Face Space entry point.

A thin adapter: webui.host holds what every door shares and admits every caller, webui.chat runs
requests through the pipeline and webui.render turns its events into chat messages; this file lays
out the page and wires the events (ChatPage). Honours GRADIO_SERVER_NAME
and GRADIO_SERVER_PORT (Gradio reads them in launch()) and every setting of hugginggpt.config,
among them HUGGINGGPT_APP_MAX_UPLOAD_MB and HUGGINGGPT_APP_CONCURRENCY.

The same port also serves MCP tools at /gradio_api/mcp/ (webui.doors.mcp_tools; HUGGINGGPT_MCP_SERVER=0
turns them off) and an OpenAI-compatible API under /v1 (webui.doors.openai_api; on when
HUGGINGGPT_API_KEYS is set). The concurrency limit covers those calls too.
"""

# No `from __future__ import annotations`: Gradio finds the gr.Request parameters by their annotation.
import webui.gpu  # noqa: F401  (first of all: it imports `spaces` before anything touches torch)

# isort: split
import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr
from gradio import utils as gradio_utils
from starlette.middleware import Middleware

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings, load_settings
from hugginggpt.endpoints import Endpoint
from hugginggpt.llm import LLM
from hugginggpt.modes import INFERENCE_MODES
from webui import message_actions, resume_runs, review_panel, saved
from webui.browser_secret import browser_secret
from webui.callers import trust_no_forwarding_in_uvicorn
from webui.calls import Calls
from webui.chat import ChatApp, LLMChoice
from webui.doors.openai_api import routes as openai_routes
from webui.files import Publisher
from webui.headers import ContentSecurityPolicy
from webui.host import Host
from webui.message_wiring import MessageActions
from webui.metrics_route import route as metrics_route
from webui.page_script import page_script
from webui.proxy_warning import ProxyWarning
from webui.settings_panel import field_problems, placeholders, status_for
from webui.upload_quota import UploadQuota
from webui.visitors import Visitors

QUIET: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden"}
ROOT = Path(__file__).resolve().parent
ASSETS = ROOT / "assets"
CSS = """
#status { font-size: 0.9em; opacity: 0.85; }
#chat { min-height: 300px; }
/* Mermaid's source is shown only once it is drawn (Gradio's chat puts the source in first). */
#chat .mermaid:not(:has(svg)) { visibility: hidden; max-height: 4em; overflow: hidden; }
.hg-state { font-weight: 600; white-space: nowrap; }
.hg-done { color: #15803d; }
.hg-running { color: #1d4ed8; }
.hg-failed { color: #b91c1c; }
.hg-skipped { color: #a16207; }
.hg-stopped, .hg-not-finished, .hg-waiting { color: #4b5563; }
.field-problem { font-size: 0.9em; }
.field-problem, .field-problem * { color: #b91c1c !important; }
#review-form { padding: 0.75em; }
#chat .mermaid { overflow-x: auto; }  /* the plan graph at its own size, readable on a phone */
/* Gradio 6.31's pencil cannot send an edited bubble that holds a file (its submit fails in the
   page): a request with attachments is done again with the retry icon or sent anew instead. */
#chat .user-row:has(img, audio, video) + .message-buttons button[aria-label="Edit"] { display: none; }
footer .divider:last-child { display: none; }  /* Gradio's dot before the Settings link we turn off */
@media (max-width: 480px) {
  #chat { height: calc(100dvh - 420px) !important; min-height: 240px; }
  #intro p { display: none; }
  #request-row { flex-wrap: wrap; }
  #stop { min-width: 100% !important; }
}
"""

EXAMPLES = [
    ("Describe this picture, then read the description aloud.", "street.png"),
    ("What objects are in this image? Draw boxes around them.", "street.png"),
    ("Transcribe this recording.", "speech.wav"),
    ("Make a picture of a lighthouse at dusk and tell me what is in it.", None),
]


@dataclass
class Page:
    """The components that the event wiring needs."""

    status: Any
    chatbot: Any
    box: Any
    stop: Any
    traces: Any
    base_url: Any
    model: Any
    key: Any
    mode: Any
    top_k: Any
    keep_key: Any
    problems: dict[str, Any]  # a Markdown under each typed field, for its problem
    new: Any
    earlier: Any
    store: Any  # gr.BrowserState: this browser's conversations and settings (webui.saved)
    conv_key: Any  # gr.State: the open conversation's key
    undo: Any  # "Undo delete", shown after a conversation was deleted
    deleted: Any  # gr.State: the key of the conversation deleted last, for the undo
    review: review_panel.ReviewControls  # the plan's review form and the re-run buttons
    limits: list[Any]  # largest model (GB), most to download (GB), licences: hugginggpt.limits
    limits_state: Any  # gr.State: the limits' values, for the chat (a State is no API parameter)

    @property
    def choice_inputs(self) -> list[Any]:
        return [self.base_url, self.model, self.key, self.mode, self.top_k, *self.limits]

    @property
    def chat_inputs(self) -> list[Any]:
        """The chat's inputs after the message; the limits come in a State, so the API stays as it was."""
        return [self.conv_key, *self.choice_inputs[:5], self.review.toggle, self.limits_state]

    @property
    def status_outputs(self) -> list[Any]:
        return [self.status, *self.problems.values()]


def build_demo(
    settings: Settings | None = None,
    *,
    catalog: Catalog | None = None,
    endpoint: Endpoint | None = None,
    llm: LLM | None = None,
    max_upload_bytes: int | None = None,
    concurrency: int | None = None,
    public_llm_only: bool | None = None,
    warm_up: bool = False,
):
    """The Gradio app. Tests inject a catalog, an endpoint (or local tiny models) and an LLM URL.
    `warm_up`: import the model runtime and load the local LLM now, in the background."""
    settings = settings or load_settings()
    host = Host(
        settings,
        catalog=catalog,
        endpoint=endpoint,
        llm=llm,
        max_upload_bytes=max_upload_bytes,
        public_llm_only=public_llm_only,
        concurrency=concurrency,
    )
    chat = ChatApp(host)
    if host.settings.resume_on_start:  # the runs the app was running when it stopped, once
        resume_runs.resume_on_start(chat)
    calls = Calls(host)  # stateless calls from MCP clients and the OpenAI-compatible API
    if warm_up:
        host.backends.warm_up()
    # delete_cache: Gradio's copies of uploads and outputs are removed after app_upload_keep_hours
    # (a conversation's own copies are deleted with it, and re-made while it is shown: webui.files).
    keep = int(settings.app_upload_keep_hours * 3600)
    with gr.Blocks(title="HuggingGPT", delete_cache=(min(3600, keep), keep)) as demo:
        page = ChatPage(host, chat, concurrency or settings.app_concurrency)
        page.build(demo)
        if settings.mcp_server:
            from webui.doors.mcp_tools import register as register_mcp_tools

            register_mcp_tools(calls)
    demo.host = host  # for tests and embedding: what every door shares
    demo.chat_app = chat  # the conversations behind the page
    demo.calls = calls
    return demo


class ChatPage:
    """The page: its layout, and its handlers as named methods (what Gradio calls on each event).
    Per visitor it keeps only which conversation each browser session has open."""

    def __init__(self, host: Host, chat: ChatApp, concurrency: int):
        self.host, self.chat, self.concurrency = host, chat, concurrency
        self.visitors = Visitors(host)  # which conversation each browser session has open
        self.publisher = Publisher(Path(gradio_utils.get_upload_folder()))

    def build(self, demo: Any) -> None:
        self.demo = demo
        self.ui = self._layout()
        self.followed = gr.State(False)  # whether the last of them followed one: a run's after-steps
        self._wire_run()
        self._wire_conversations()
        self._wire_settings()
        self._wire_load()

    # ---- layout ----------------------------------------------------------------------------------

    def _layout(self) -> Page:
        settings = self.host.settings
        gr.Markdown(
            "## HuggingGPT\nAsk for something that needs models: the controller LLM plans tasks, picks "
            "Hugging Face models for them, runs them and answers. Attach images or audio with the clip.",
            elem_id="intro",
        )
        if settings.uses_oauth:  # a signed-in visitor's token pays for their hosted calls and ZeroGPU quota
            gr.LoginButton(elem_id="login")
        status = gr.Markdown(elem_id="status")
        new, earlier, undo = self._conversation_row()
        chatbot = gr.Chatbot(
            value=[],
            placeholder=self.host.welcome() or None,  # said while the chat is empty
            label="Conversation",
            elem_id="chat",
            editable="user",  # the pencil on a request: edit its words and run it again in place
            height="calc(100dvh - 340px)",  # the message box in view on first load (test_browser_layout)
            autoscroll=True,
            group_consecutive_messages=True,  # a request's work, media and answer read as one turn
        )
        with gr.Row(elem_id="request-row"):
            # No file_types: Gradio would refuse other files with a pop-up before the handler runs;
            # webui.uploads answers in the chat instead, for every kind of bad file alike.
            box = gr.MultimodalTextbox(
                file_count="multiple",
                show_label=False,
                scale=8,
                placeholder="Type a request; attach images or audio.",
                elem_id="request",
            )
            stop = gr.Button("Stop", variant="stop", scale=1, min_width=80, visible=False, elem_id="stop")
        review = review_panel.layout(gr, settings.review)
        gr.Examples(
            examples=[[_example(text, name)] for text, name in EXAMPLES],
            inputs=[box],
            label="Examples (files in assets/)",
        )
        # Each request's trace is linked in its own turn; this list serves API clients.
        traces = gr.File(label="Traces (JSON)", file_count="multiple", interactive=False, visible=False)
        base_url, model, key, mode, top_k, keep_key, problems, limits = self._settings_panel()
        # A stable secret: what a browser saved can still be read after the app restarts.
        secret = browser_secret(settings.app_secret, Path(settings.workdir))
        store = gr.BrowserState(saved.empty(), storage_key="hugginggpt", secret=secret)
        conv_key = gr.State("")
        return Page(
            status, chatbot, box, stop, traces, base_url, model, key, mode, top_k, keep_key, problems,
            new, earlier, store, conv_key, undo, gr.State(""), review, limits, gr.State(None),
        )  # fmt: skip

    def _conversation_row(self) -> tuple[Any, Any, Any]:
        with gr.Row(equal_height=True, elem_id="conversations"):
            new = gr.Button("New conversation", size="sm", scale=0, min_width=150, elem_id="new-conversation")
            earlier = gr.Dropdown(
                choices=[],
                value=None,
                allow_custom_value=True,  # each browser has its own list; webui.saved checks the keys
                show_label=False,
                container=False,
                scale=3,
                min_width=180,
                label="Conversations in this browser",
                elem_id="earlier",
            )
            undo = gr.Button(
                "Undo delete", size="sm", scale=0, min_width=120, visible=False, elem_id="undo-delete"
            )
        return new, earlier, undo

    def _settings_panel(self) -> tuple[Any, Any, Any, Any, Any, Any, dict[str, Any], list[Any]]:
        """base_url, model, key, mode, top_k, keep_key, the problems under the typed fields, and the
        limits on the models."""
        settings = self.host.settings
        server = placeholders(settings)  # an empty field means the server's value, shown greyed in it
        with gr.Accordion("Settings", open=False, elem_id="settings"):
            gr.Markdown("These apply to this browser only; the API key is kept only if you tick the box.")
            problems = {}
            with gr.Row():
                with gr.Column(min_width=220):
                    base_url = gr.Textbox(
                        label="LLM base URL",
                        value="",
                        placeholder=server["base_url"],
                        info="An OpenAI-compatible server; empty: the server's",
                    )
                    problems["base_url"] = gr.Markdown(visible=False, elem_classes="field-problem")
                with gr.Column(min_width=220):
                    model = gr.Textbox(
                        label="LLM model",
                        value="",
                        placeholder=server["model"],
                        info="e.g. gpt-4o-mini; empty: the server's",
                    )
                    problems["model"] = gr.Markdown(visible=False, elem_classes="field-problem")
                with gr.Column(min_width=220):
                    key = gr.Textbox(
                        label="API key",
                        type="password",
                        value="",
                        placeholder="empty: the server's key, if any",
                    )
                    keep_key = gr.Checkbox(label="Remember the API key in this browser", value=False)
            with gr.Row():
                mode = gr.Radio(
                    list(INFERENCE_MODES),
                    value=settings.inference,
                    label="Where models run",
                    info=" · ".join(f"{name}: {help}" for name, (_, help) in INFERENCE_MODES.items()),
                )
                with gr.Column(min_width=220):
                    # A number, not a slider: a slider refuses a value out of range with a bare "Error"
                    # pop-up; here the problem is said under the field.
                    top_k = gr.Number(
                        value=settings.top_k,
                        precision=0,
                        label="Candidate models per task (top-K)",
                        info="1 to 10",
                    )
                    problems["top_k"] = gr.Markdown(visible=False, elem_classes="field-problem")
            limits = self._limit_fields(settings)
        return base_url, model, key, mode, top_k, keep_key, problems, limits

    def _limit_fields(self, settings: Settings) -> list[Any]:
        """The largest model, the most to download and the licences (hugginggpt.limits): a visitor
        may tighten the server's, never loosen them; 0 or empty means the server's."""
        with gr.Row():
            return [
                gr.Number(
                    settings.max_model_gb,
                    label="Largest model (GB, 0: no limit)",
                    minimum=0,
                    elem_id="max-model-gb",
                ),
                gr.Number(
                    settings.max_download_gb,
                    label="Most to download per request (GB)",
                    minimum=0,
                    elem_id="max-download-gb",
                ),
                gr.Textbox(
                    ",".join(settings.licenses),
                    label="Licences allowed (e.g. mit,apache-2.0)",
                    elem_id="licenses",
                ),
            ]

    # ---- who and which conversation --------------------------------------------------------------

    def conversation_key(self, conv_key: str, request: Any) -> str:
        """The browser's conversation key; API clients (no browser store) are keyed by session."""
        return self.visitors.key(conv_key, _session(request))

    def published(self, key: str, messages: list[dict[str, Any]], trace_files: list[str], running: bool):
        """The chat and the traces as the page gets them: the conversation's served copies, and once
        no run goes, the actions under the last message (webui.message_actions)."""
        conv = self.host.find(key)
        if conv is None:  # none yet (its first message makes it): no file of its own to serve
            return messages, []
        if not running:
            messages = message_actions.with_options(messages, message_actions.options(conv))
        return self.publisher.messages(conv, messages), [self.publisher.file(conv, t) for t in trace_files]

    def shown(self, key: str) -> tuple[list[dict[str, Any]], list[str]]:
        conv = self.host.find(key)
        if conv is None:  # a page load or a new conversation makes nothing until its first message
            return [], []
        return self.published(key, conv.display, conv.traces, conv.cancel is not None)

    def exists(self, key: str) -> bool:
        return self.host.conversations.title(key) is not None

    def listing(self, store: Any) -> Any:
        """This browser's conversations, the open one selected (none yet: a prompt to pick one).
        Their titles stay on the server (ConversationTable.title): the browser keeps keys only."""
        titles = [(self.host.conversations.title(key), key) for key in saved.keys(store)]
        listed = [(title, key) for title, key in titles if title is not None]
        current = saved.normal(store)["current"]
        if any(key == current for _, key in listed):
            return gr.Dropdown(choices=listed, value=current)
        return gr.Dropdown(choices=[("New conversation (pick an earlier one here)", ""), *listed], value="")

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
        the_choice = _choice(base_url, model, key, mode, top_k, *(limits or ()))
        yield from self.answer(message, conv_key, the_choice, review, request, None)

    def respond_signed_in(
        self, message: dict[str, Any], conv_key, base_url, model, key, mode, top_k, review, limits,
        request: gr.Request, token: gr.OAuthToken | None,
    ):  # fmt: skip
        the_choice = _choice(base_url, model, key, mode, top_k, *(limits or ()))
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

    def streamed(self, session: str, updates: Any):
        """A run's chat updates as the page gets them: (chatbot, traces, message box)."""
        for messages, trace_files, running in updates:
            conv = self.host.find(session)
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
        conv = self.host.find(key)
        if saved.valid_key(key) and conv is not None and conv.requests:
            store = saved.remember(store, key)  # its title stays on the server (ConversationTable.title)
        return gr.MultimodalTextbox(interactive=True), gr.Button(visible=False), store, self.listing(store)

    def on_stop(self, conv_key: str, request: gr.Request) -> None:
        self.chat.stop(self.conversation_key(conv_key, request))

    # ---- conversations -----------------------------------------------------------------------------

    def on_new(self, conv_key: str, store: Any, request: gr.Request):
        key = saved.new_key()
        self.visitors.opened(_session(request), key)
        store = saved.open_key(store, key, keep=self.exists)
        hidden = gr.Button(visible=False)
        return key, *self.shown(key), store, self.listing(store), hidden, hidden

    def on_pick(self, picked: str, conv_key: str, store: Any, request: gr.Request):
        if not picked or picked == conv_key or picked not in saved.keys(store):
            # Nothing at all comes back: another event (New conversation) may be switching meanwhile.
            return (gr.skip(),) * 7
        if self.host.find(picked) is None:  # deleted on the server since
            store = saved.forget(store, picked)
            gr.Info("That conversation is no longer on the server (deleted, or past its retention time).")
            return conv_key, gr.skip(), gr.skip(), store, self.listing(store), gr.skip(), gr.skip()
        return self.opened(picked, store, request)

    def opened(self, key: str, store: Any, request: Any):
        """`key` as the open conversation, remembered by the browser for its next visit."""
        self.visitors.opened(_session(request), key)
        store = saved.remember(saved.open_key(store, key, keep=self.exists), key)
        hidden = gr.Button(visible=False)
        return key, *self.shown(key), store, self.listing(store), hidden, hidden

    def on_clear(self, conv_key: str, request: gr.Request):
        """The trash icon: this conversation is deleted, its files unreachable at once; a new one
        opens, and "Undo delete" brings the old one back for a while."""
        old = self.conversation_key(conv_key, request)
        can_undo = self.chat.reset(old)
        key = saved.new_key() if saved.valid_key(old) else old
        if key != old:
            self.visitors.opened(_session(request), key)
        return key, [], None, gr.Button(visible=can_undo), old if can_undo else ""

    def on_undo(self, deleted: str, store: Any, request: gr.Request):
        if not saved.valid_key(deleted) or self.host.conversations.undelete(deleted) is None:
            gr.Info("That conversation can no longer be brought back.")
            return gr.skip(), gr.skip(), gr.skip(), store, gr.skip(), gr.skip(), gr.Button(visible=False)
        return self.opened(deleted, store, request)

    def tidy(self, conv_key: str, store: Any):
        """The browser's list without conversations the server no longer has, the open one current."""
        store = saved.normal(store)
        for key in saved.keys(store):
            if self.host.find(key) is None:
                store = saved.forget(store, key)
        store = saved.open_key(store, conv_key) if saved.valid_key(conv_key) else store
        return store, self.listing(store)

    def on_unload(self, request: gr.Request) -> None:
        key = self.visitors.left(_session(request))
        if key is None:  # an API client or a page without a store: its conversation ends with it
            self.chat.drop(_session(request))
        else:  # its run goes on (webui.live_runs); the conversation stays on disk for the next visit
            self.host.conversations.leave(key)

    async def follow(self, conv_key: str, request: gr.Request):
        """A run going on in the open conversation (begun before a reload, in another tab, or by a
        page since closed): its chat as it advances, Stop shown and the message box locked meanwhile."""
        session, key = _session(request), self.conversation_key(conv_key, request)
        run = self.chat.live(key)
        if run is None:  # (a generator that yields nothing would leave the message box unusable)
            yield *(gr.skip(),) * (4 + len(self.plan_controls.busy_outputs)), False
            return
        busy = self.plan_controls.busy()
        async for messages, trace_files, running in run.changes():
            conv = self.host.find(key)
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
        key, store = self.visitors.restored(store, _session(request))
        s = store["settings"]
        base = self.host.settings
        return (
            key, *self.shown(key), store, self.listing(store),
            s.get("base_url", ""), s.get("model", ""),  # empty: the server's, as the placeholders say
            s.get("api_key", ""), s.get("mode") if s.get("mode") in INFERENCE_MODES else base.inference,
            min(10, max(1, int(s.get("top_k") or base.top_k))),
            bool(s.get("api_key")), bool(s.get("review", base.review)),
        )  # fmt: skip

    # ---- settings ----------------------------------------------------------------------------------

    def show_status(self, base_url, model, key, mode, top_k, *limits):
        c = _choice(base_url, model, key, mode, top_k, *limits)
        problems = field_problems(self.host, c)
        fields = [
            gr.Markdown(value=problems.get(name, ""), visible=name in problems) for name in self.ui.problems
        ]
        return status_for(self.host, c, problems), *fields

    def save_settings(
        self, store, base_url, model, key, mode, top_k, _max_model, _max_download, _licences, keep_key, review
    ):  # the limits are not remembered in the browser: each visit starts at the server's
        values = {"base_url": base_url or "", "model": model or "", "mode": mode or "", "top_k": top_k}
        values["review"] = bool(review)
        return saved.with_settings(store, values, keep_key=bool(keep_key), api_key=key or "")

    def follow_warm_up(self, base_url, model, key, mode, top_k, *limits):
        """While the runtime warms up, the status line follows it; the timer stops once it is ready."""
        state = self.host.backends.warm_state
        done = state in ("", "ready") or "not available" in state
        return *self.show_status(base_url, model, key, mode, top_k, *limits), gr.Timer(active=not done)

    # ---- wiring ------------------------------------------------------------------------------------

    def _wire_run(self) -> None:
        ui = self.ui
        # Stop shows first, then the request runs (two listeners on one trigger would run in turn).
        show_stop = (lambda: gr.Button(visible=True), None, ui.stop)
        finish = (self.after_run, [ui.conv_key, ui.store], [ui.box, ui.stop, ui.store, ui.earlier])
        self.plan_controls = review_panel.Wiring(
            gr, ui.review, self.chat, session_of=self.conversation_key, conv_key=ui.conv_key,
            choice_inputs=ui.choice_inputs, choice=_choice, show=self.published,
            run_outputs=[ui.chatbot, ui.traces, ui.box], before_run=show_stop, after_run=finish,
        )  # fmt: skip
        self.plan_controls.wire()
        self.refresh = (self.plan_controls.refresh, [ui.conv_key], self.plan_controls.state_outputs)
        busy = [ui.stop, *self.plan_controls.busy_outputs]  # the re-run buttons are disabled meanwhile
        started = ui.box.submit(
            lambda: (gr.Button(visible=True), *self.plan_controls.busy()), None, busy, queue=False, **QUIET
        )
        self.run = started.then(
            # Gradio asks for sign-in routes only when a handler takes a token: off a Space they need a login.
            self.respond_signed_in if self.host.settings.uses_oauth else self.respond,
            [ui.box, *ui.chat_inputs],
            [ui.chatbot, ui.traces, ui.box],
            api_name="chat",
            api_visibility="undocumented",  # callable by gradio_client, but not an MCP tool
            concurrency_limit=self.concurrency,
            show_progress="hidden",
        )
        self.run.then(*finish, **QUIET).then(*self.refresh, **QUIET)
        actions = MessageActions(
            gr, self.host, self.chat, session_of=self.conversation_key, choice=_choice, stream=self.streamed,
            concurrency=self.concurrency,
        )  # fmt: skip
        actions_runs = actions.wire(
            ui.chatbot, [*ui.chat_inputs], [ui.chatbot, ui.traces, ui.box], busy=busy,
            busy_values=lambda: (gr.Button(visible=True), *self.plan_controls.busy()),
            after=[finish, self.refresh],
        )  # fmt: skip
        self.runs = [self.run, *actions_runs]
        ui.stop.click(
            self.on_stop, [ui.conv_key], None, queue=False, api_name="stop", api_visibility="undocumented"
        )

    def _wire_conversations(self) -> None:
        ui, refresh = self.ui, self.refresh
        switched = [ui.conv_key, ui.chatbot, ui.traces, ui.store, ui.earlier, ui.stop, ui.undo]
        ui.new.click(self.on_new, [ui.conv_key, ui.store], switched, cancels=self.runs, **QUIET).then(
            *refresh, **QUIET
        )
        # A pick, not any input: Gradio's menu also sends "input" when it merely loses focus, with
        # the conversation it shows; run after "New conversation", that switched back to it.
        picked = ui.earlier.select(
            self.on_pick, [ui.earlier, ui.conv_key, ui.store], switched, cancels=self.runs, **QUIET
        ).then(*refresh, **QUIET)
        self._follow_after(picked)
        ui.chatbot.clear(
            self.on_clear,
            [ui.conv_key],
            [ui.conv_key, ui.chatbot, ui.traces, ui.undo, ui.deleted],
            api_name="new_conversation",
            api_visibility="undocumented",
        ).then(self.tidy, [ui.conv_key, ui.store], [ui.store, ui.earlier], **QUIET).then(*refresh, **QUIET)
        ui.undo.click(self.on_undo, [ui.deleted, ui.store], switched, cancels=self.runs, **QUIET).then(
            *refresh, **QUIET
        )
        self.demo.unload(self.on_unload)

    def _wire_settings(self) -> None:
        ui = self.ui
        inputs, status_outputs = ui.choice_inputs, ui.status_outputs
        for field in (ui.base_url, ui.model, ui.key):  # typed fields: on leaving them, not on every key
            gr.on([field.blur, field.submit], self.show_status, inputs, status_outputs, **QUIET)
        gr.on([ui.top_k.blur, ui.top_k.submit], self.show_status, inputs, status_outputs, **QUIET)
        ui.mode.change(self.show_status, inputs, status_outputs, **QUIET)
        for field in ui.limits:  # kept for the chat in a State; a request checks them (hugginggpt.limits)
            field.change(lambda *values: list(values), ui.limits, ui.limits_state, queue=False, **QUIET)
        remembered = [ui.store, *inputs, ui.keep_key, ui.review.toggle]
        for field in (*inputs[:5], ui.keep_key, ui.review.toggle):
            field.change(self.save_settings, remembered, ui.store, queue=False, **QUIET)
        warming = gr.Timer(2.0, active=self.host.backends.warm_state not in ("", "ready"))
        warming.tick(self.follow_warm_up, inputs, [*status_outputs, warming], **QUIET)

    def _wire_load(self) -> None:
        ui = self.ui
        # the limits are not remembered in the browser: each visit starts at the server's
        loaded = [ui.conv_key, ui.chatbot, ui.traces, ui.store, ui.earlier, *ui.choice_inputs[:5]]
        loaded_page = (
            self.demo.load(self.restore, [ui.store], [*loaded, ui.keep_key, ui.review.toggle], **QUIET)
            .then(self.show_status, ui.choice_inputs, ui.status_outputs, **QUIET)
            .then(*self.refresh, **QUIET)
        )
        # No Gradio `cancels` stop a follow when the page opens another conversation: cancelling an
        # event the page has not sent yet (a load's chain on a busy server) answers 422. `follow`
        # itself stops once its page shows another conversation (Visitors.shows).
        self._follow_after(loaded_page)

    def _follow_after(self, opened: Any) -> None:
        """After a conversation is shown: a run going on in it is followed until it ends (the page
        then as after a run of its own)."""
        ui = self.ui
        outputs = [ui.chatbot, ui.traces, ui.box, ui.stop, *self.plan_controls.busy_outputs, self.followed]
        # Waits on the event loop, not in a worker: as many pages may follow as there are runs.
        followed = opened.then(self.follow, [ui.conv_key], outputs, concurrency_limit=None, **QUIET)
        after = [self.followed, ui.conv_key, ui.store]
        followed.then(self.after_following, after, [ui.box, ui.stop, ui.store, ui.earlier], **QUIET).then(
            self.refresh_after_following, after[:2], self.plan_controls.state_outputs, **QUIET
        )


def launch_options(max_upload_bytes: int = 20_000_000, *, demo: Any = None) -> dict[str, Any]:
    """launch() arguments shared by main() and the tests (Gradio 6 takes css in launch()).

    Given the `demo` from build_demo, also its other doors: the MCP server (unless settings turn it
    off) and the OpenAI-compatible API under /v1 (which answers 404 unless api_keys are set)."""
    options: dict[str, Any] = {
        "css": CSS,
        # No run history: Gradio would keep every request's inputs, the typed API key among them,
        # in the browser's localStorage.
        "run_history": False,
        # No traffic figures at Gradio's /monitoring for anyone who asks (/metrics has its key).
        "enable_monitoring": False,
        # One Settings entry point, the page's own: Gradio's footer link opens its display settings.
        "footer_links": ["api", "gradio"],
        # Boxes the person opened in the chat stay open across a reload (kept in the browser), and
        # a plan graph removed while Mermaid draws it leaves no error in the console.
        "js": page_script(),
        # Only the example files are served by path; conversations' files are served from Gradio's
        # cache under random folder names, each copy deleted when its conversation ends (webui.files).
        "allowed_paths": [str(ASSETS)],
        # A hard stop well above the friendly per-file check (which answers in the chat).
        "max_file_size": max(4 * max_upload_bytes, 50_000_000),
        # Images and media only from the app: the chat shows markdown the LLM wrote (webui.headers).
        "app_kwargs": {"middleware": [Middleware(ContentSecurityPolicy)]},
    }
    trust_no_forwarding_in_uvicorn()  # who is calling is the app's decision (webui.callers)
    if demo is not None:
        settings = demo.host.settings
        options["mcp_server"] = settings.mcp_server
        quota = Middleware(
            UploadQuota,
            callers=demo.host.callers,
            max_bytes=int(settings.app_upload_quota_mb * 1_000_000),
            window_seconds=settings.app_upload_keep_hours * 3600,
        )
        options["app_kwargs"]["middleware"].append(quota)
        if not settings.is_public:  # a proxy in front would make strangers trusted
            options["app_kwargs"]["middleware"].append(Middleware(ProxyWarning))
        options["app_kwargs"]["routes"] = [openai_routes(demo.calls)]
        if settings.metrics:  # Prometheus, HUGGINGGPT_METRICS=1
            options["app_kwargs"]["routes"].append(metrics_route(settings.metrics_key))
    return options


def _example(text: str, name: str | None) -> dict[str, Any]:
    return {"text": text, "files": [str(ASSETS / name)] if name else []}


def _choice(base_url: str, model: str, key: str, mode: str, top_k: float | None, *limits: Any) -> LLMChoice:
    """`limits`: the largest model, the most to download, the licences (Page.limits)."""
    max_model, max_download, licences = (*limits, None, None, None)[:3]
    return LLMChoice(
        base_url or "", model or "", key or "", mode or "", top_k, max_model, max_download, licences or ""
    )


def _session(request: Any) -> str:
    return getattr(request, "session_hash", None) or "local"


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per HTTP call is noise
    settings = load_settings()
    demo = build_demo(settings, warm_up=True)
    limit = demo.host.max_upload_bytes
    demo.queue(max_size=64).launch(**launch_options(limit, demo=demo))


if __name__ == "__main__":
    main()
