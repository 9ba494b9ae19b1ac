"""HuggingGPT in the browser: `python app.py`, also the Hugging Face Space entry point.

A thin adapter: webui.chat runs requests through the pipeline and webui.render turns its events
into chat messages; this file lays out the page and wires the events. Honours GRADIO_SERVER_NAME
and GRADIO_SERVER_PORT (Gradio reads them in launch()) and every setting of hugginggpt.config,
among them HUGGINGGPT_APP_MAX_UPLOAD_MB and HUGGINGGPT_APP_CONCURRENCY.

The same port also serves MCP tools at /gradio_api/mcp/ (webui.mcp_tools; HUGGINGGPT_MCP_SERVER=0
turns them off) and an OpenAI-compatible API under /v1 (webui.openai_api; on when
HUGGINGGPT_API_KEYS is set). The concurrency limit covers those calls too.
"""

# No `from __future__ import annotations`: Gradio finds the gr.Request parameters by their annotation.
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.middleware import Middleware

import webui.gpu  # noqa: F401  (first of the project: it imports `spaces` before anything touches torch)
from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings, load_settings
from hugginggpt.endpoints import Endpoint
from hugginggpt.llm import LLM
from hugginggpt.modes import INFERENCE_MODES
from webui import review_panel, saved
from webui.browser_secret import browser_secret
from webui.calls import Calls
from webui.chat import ChatApp, LLMChoice
from webui.files import Publisher
from webui.headers import ContentSecurityPolicy
from webui.openai_api import routes as openai_routes
from webui.settings_panel import field_problems, status_for

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

    @property
    def choice_inputs(self) -> list[Any]:
        return [self.base_url, self.model, self.key, self.mode, self.top_k]


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
    import gradio as gr

    settings = settings or load_settings()
    chat = ChatApp(
        settings,
        catalog=catalog,
        endpoint=endpoint,
        llm=llm,
        max_upload_bytes=max_upload_bytes,
        public_llm_only=public_llm_only,
        concurrency=concurrency,
    )
    calls = Calls(chat)  # stateless calls from MCP clients and the OpenAI-compatible API
    if warm_up:
        chat.backends.warm_up()
    # delete_cache: Gradio's copies of uploads and outputs are removed after a day (checked hourly).
    with gr.Blocks(title="HuggingGPT", delete_cache=(3600, 86400)) as demo:
        page = _layout(gr, settings, chat)
        _wire(gr, demo, page, chat, concurrency or settings.app_concurrency)
        if settings.mcp_server:
            from webui.mcp_tools import register as register_mcp_tools  # needs gradio, like this function

            register_mcp_tools(calls)
    demo.chat_app = chat  # for tests and embedding: the conversations behind the page
    demo.calls = calls
    return demo


def _layout(gr: Any, settings: Settings, chat: ChatApp) -> Page:
    gr.Markdown(
        "## HuggingGPT\nAsk for something that needs models: the controller LLM plans tasks, picks "
        "Hugging Face models for them, runs them and answers. Attach images or audio with the clip.",
        elem_id="intro",
    )
    if settings.uses_oauth:  # a signed-in visitor's token pays for their hosted calls and ZeroGPU quota
        gr.LoginButton(elem_id="login")
    status = gr.Markdown(elem_id="status")
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
    chatbot = gr.Chatbot(
        value=chat.welcome(),
        label="Conversation",
        elem_id="chat",
        height="calc(100dvh - 300px)",  # the message box in view on first load (tests/test_browser_layout.py)
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
    with gr.Accordion("Settings", open=False, elem_id="settings"):
        gr.Markdown("These apply to this browser only; the API key is kept only if you tick the box.")
        problems = {}
        with gr.Row():
            with gr.Column(min_width=220):
                base_url = gr.Textbox(
                    label="LLM base URL",
                    value=settings.llm_base_url or "",
                    placeholder="https://api.openai.com/v1 (OpenAI-compatible)",
                )
                problems["base_url"] = gr.Markdown(visible=False, elem_classes="field-problem")
            with gr.Column(min_width=220):
                model = gr.Textbox(
                    label="LLM model",
                    value=settings.llm_model or "",
                    placeholder="gpt-4o-mini, Qwen/Qwen2.5-72B-Instruct, ...",
                )
                problems["model"] = gr.Markdown(visible=False, elem_classes="field-problem")
            with gr.Column(min_width=220):
                key = gr.Textbox(
                    label="API key", type="password", value="", placeholder="empty: the server's key, if any"
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
    # A stable secret: what a browser saved can still be read after the app restarts.
    secret = browser_secret(settings.app_secret, Path(chat.settings.workdir))
    store = gr.BrowserState(saved.empty(), storage_key="hugginggpt", secret=secret)
    conv_key = gr.State("")
    return Page(
        status, chatbot, box, stop, traces, base_url, model, key, mode, top_k, keep_key, problems,
        new, earlier, store, conv_key, undo, gr.State(""), review,
    )  # fmt: skip


def _wire(gr: Any, demo: Any, page: Page, chat: ChatApp, concurrency: int) -> None:
    from gradio import utils

    publisher = Publisher(Path(utils.get_upload_folder()))
    browsers: dict[str, str] = {}  # session hash -> conversation key, for pages with a browser store

    def choice(base_url: str, model: str, key: str, mode: str, top_k: float | None) -> LLMChoice:
        return LLMChoice(base_url or "", model or "", key or "", mode or "", top_k)

    def conversation_key(conv_key: str, request: Any) -> str:
        """The browser's conversation key; API clients (no browser store) are keyed by session."""
        if saved.valid_key(conv_key):
            browsers[_session(request)] = conv_key
            return conv_key
        return _session(request)

    def respond(
        message: dict[str, Any], conv_key, base_url, model, key, mode, top_k, review, request: gr.Request
    ):
        yield from answer(message, conv_key, choice(base_url, model, key, mode, top_k), review, request, None)

    def respond_signed_in(
        message: dict[str, Any], conv_key, base_url, model, key, mode, top_k, review, request: gr.Request,
        token: gr.OAuthToken | None,
    ):  # fmt: skip
        the_choice = choice(base_url, model, key, mode, top_k)
        yield from answer(message, conv_key, the_choice, review, request, token.token if token else None)

    def answer(message: dict[str, Any], conv_key, the_choice: LLMChoice, review, request: Any, hf_token):
        session = conversation_key(conv_key, request)
        client = getattr(getattr(request, "client", None), "host", "") or ""
        for messages, trace_files, running in chat.respond(
            session, message, the_choice, client=client, hf_token=hf_token, review=bool(review)
        ):
            conv = chat.conversations.find(session)
            if conv is None:  # refused a conversation (the table is full): the message says why
                yield messages, [], gr.MultimodalTextbox(value=None, interactive=True)
                return
            if conv.ended:  # the conversation ended meanwhile: nothing more is served for it
                return
            yield (
                *published(session, messages, trace_files),
                gr.MultimodalTextbox(value=None, interactive=not running),
            )

    def published(key: str, messages: list[dict[str, Any]], trace_files: list[str]):
        """The chat and the traces as the page gets them: the conversation's served copies."""
        conv = chat.conversation(key)
        return publisher.messages(conv, messages), [publisher.file(conv, t) for t in trace_files]

    def shown(key: str) -> tuple[list[dict[str, Any]], list[str]]:
        conv = chat.conversations.find(key)  # none yet: made on the first request, not for a look
        if conv is None:
            return chat.welcome(), []
        return published(key, conv.display, conv.traces)

    def exists(key: str) -> bool:
        return chat.conversations.title(key) is not None

    def listing(store: Any) -> Any:
        """This browser's conversations, the open one selected (none yet: a prompt to pick one)."""
        titles = [(chat.conversations.title(key), key) for key in saved.keys(store)]
        listed = [(title, key) for title, key in titles if title is not None]
        current = saved.normal(store)["current"]
        if any(key == current for _, key in listed):
            return gr.Dropdown(choices=listed, value=current)
        return gr.Dropdown(choices=[("New conversation (pick an earlier one here)", ""), *listed], value="")

    def after_run(conv_key: str, store: Any, request: gr.Request):
        key = conversation_key(conv_key, request)
        conv = chat.conversations.find(key)
        if saved.valid_key(key) and conv is not None and conv.requests:
            store = saved.remember(store, key)  # its title stays on the server (ConversationTable.title)
        return gr.MultimodalTextbox(interactive=True), gr.Button(visible=False), store, listing(store)

    def on_stop(conv_key: str, request: gr.Request) -> None:
        chat.stop(conversation_key(conv_key, request))

    def on_new(conv_key: str, store: Any, request: gr.Request):
        key = saved.new_key()
        browsers[_session(request)] = key
        store = saved.open_key(store, key, keep=exists)
        return key, *shown(key), store, listing(store), gr.Button(visible=False), gr.Button(visible=False)

    def on_pick(picked: str, conv_key: str, store: Any, request: gr.Request):
        if not picked or picked == conv_key or picked not in saved.keys(store):
            # Nothing at all comes back: another event (New conversation) may be switching meanwhile.
            return (gr.skip(),) * 7
        if chat.conversations.find(picked) is None:  # deleted on the server since
            store = saved.forget(store, picked)
            gr.Info("That conversation is no longer on the server (deleted, or past its retention time).")
            return conv_key, gr.skip(), gr.skip(), store, listing(store), gr.skip(), gr.skip()
        return opened(picked, store, request)

    def opened(key: str, store: Any, request: Any):
        """`key` as the open conversation, remembered by the browser for its next visit."""
        browsers[_session(request)] = key
        store = saved.remember(saved.open_key(store, key, keep=exists), key)
        return key, *shown(key), store, listing(store), gr.Button(visible=False), gr.Button(visible=False)

    def on_clear(conv_key: str, request: gr.Request):
        """The trash icon: this conversation is deleted, its files unreachable at once; a new one
        opens, and "Undo delete" brings the old one back for a while."""
        old = conversation_key(conv_key, request)
        can_undo = chat.reset(old)
        key = saved.new_key() if saved.valid_key(old) else old
        if key != old:
            browsers[_session(request)] = key
        return key, chat.welcome(), None, gr.Button(visible=can_undo), old if can_undo else ""

    def on_undo(deleted: str, store: Any, request: gr.Request):
        if not saved.valid_key(deleted) or chat.conversations.undelete(deleted) is None:
            gr.Info("That conversation can no longer be brought back.")
            return gr.skip(), gr.skip(), gr.skip(), store, gr.skip(), gr.skip(), gr.Button(visible=False)
        return opened(deleted, store, request)

    def tidy(conv_key: str, store: Any):
        """The browser's list without conversations the server no longer has, the open one current."""
        store = saved.normal(store)
        for key in saved.keys(store):
            if chat.conversations.find(key) is None:
                store = saved.forget(store, key)
        store = saved.open_key(store, conv_key) if saved.valid_key(conv_key) else store
        return store, listing(store)

    def on_unload(request: gr.Request) -> None:
        key = browsers.pop(_session(request), None)
        if key is None:  # an API client or a page without a store: its conversation ends with it
            chat.drop(_session(request))
        else:  # its run stops; the conversation stays on disk for the next visit
            chat.stop(key)
            chat.conversations.leave(key)

    def restore(store: Any, request: gr.Request):
        """A page (re)load: this browser's open conversation and settings, if the server has them."""
        store = saved.normal(store)
        key = store["current"]
        if not key or chat.conversations.find(key) is None:
            store = saved.forget(store, key) if key else store
            key = saved.new_key()
            store = saved.open_key(store, key)
        browsers[_session(request)] = key
        s = store["settings"]
        base = chat.settings
        return (
            key, *shown(key), store, listing(store),
            s.get("base_url", base.llm_base_url or ""), s.get("model", base.llm_model or ""),
            s.get("api_key", ""), s.get("mode") if s.get("mode") in INFERENCE_MODES else base.inference,
            min(10, max(1, int(s.get("top_k") or base.top_k))),
            bool(s.get("api_key")), bool(s.get("review", base.review)),
        )  # fmt: skip

    def show_status(base_url, model, key, mode, top_k):
        c = choice(base_url, model, key, mode, top_k)
        problems = field_problems(chat, c)
        fields = [
            gr.Markdown(value=problems.get(name, ""), visible=name in problems) for name in page.problems
        ]
        return status_for(chat, c, problems), *fields

    def save_settings(store, base_url, model, key, mode, top_k, keep_key, review):
        values = {"base_url": base_url or "", "model": model or "", "mode": mode or "", "top_k": top_k}
        values["review"] = bool(review)
        return saved.with_settings(store, values, keep_key=bool(keep_key), api_key=key or "")

    inputs = page.choice_inputs
    status_outputs = [page.status, *page.problems.values()]
    quiet = {"api_visibility": "private", "show_progress": "hidden"}
    # Stop shows first, then the request runs (two listeners on one trigger would run in turn).
    show_stop = (lambda: gr.Button(visible=True), None, page.stop)
    started = page.box.submit(*show_stop, queue=False, **quiet)
    finish = (after_run, [page.conv_key, page.store], [page.box, page.stop, page.store, page.earlier])
    plan_controls = review_panel.Wiring(
        gr, page.review, chat, session_of=conversation_key, conv_key=page.conv_key,
        choice_inputs=inputs, choice=choice, show=published,
        run_outputs=[page.chatbot, page.traces, page.box], before_run=show_stop, after_run=finish,
    )  # fmt: skip
    plan_controls.wire()
    refresh = (plan_controls.refresh, [page.conv_key], plan_controls.state_outputs)
    run = started.then(
        # Gradio asks for sign-in routes only when a handler takes a token: off a Space they need a login.
        respond_signed_in if chat.settings.uses_oauth else respond,
        [page.box, page.conv_key, *inputs, page.review.toggle],
        [page.chatbot, page.traces, page.box],
        api_name="chat",
        api_visibility="undocumented",  # callable by gradio_client, but not an MCP tool
        concurrency_limit=concurrency,
        show_progress="hidden",
    )
    run.then(*finish, **quiet).then(*refresh, **quiet)
    page.stop.click(
        on_stop, [page.conv_key], None, queue=False, api_name="stop", api_visibility="undocumented"
    )
    switched = [page.conv_key, page.chatbot, page.traces, page.store, page.earlier, page.stop, page.undo]
    page.new.click(on_new, [page.conv_key, page.store], switched, cancels=[run], **quiet).then(
        *refresh, **quiet
    )
    page.earlier.input(
        on_pick, [page.earlier, page.conv_key, page.store], switched, cancels=[run], **quiet
    ).then(*refresh, **quiet)
    page.chatbot.clear(
        on_clear,
        [page.conv_key],
        [page.conv_key, page.chatbot, page.traces, page.undo, page.deleted],
        api_name="new_conversation",
        api_visibility="undocumented",
    ).then(tidy, [page.conv_key, page.store], [page.store, page.earlier], **quiet).then(*refresh, **quiet)
    page.undo.click(on_undo, [page.deleted, page.store], switched, cancels=[run], **quiet).then(
        *refresh, **quiet
    )
    for field in (page.base_url, page.model, page.key):  # typed fields: on leaving them, not on every key
        gr.on([field.blur, field.submit], show_status, inputs, status_outputs, **quiet)
    gr.on([page.top_k.blur, page.top_k.submit], show_status, inputs, status_outputs, **quiet)
    page.mode.change(show_status, inputs, status_outputs, **quiet)
    remembered = [page.store, *inputs, page.keep_key, page.review.toggle]
    for field in (
        page.base_url,
        page.model,
        page.key,
        page.mode,
        page.top_k,
        page.keep_key,
        page.review.toggle,
    ):
        field.change(save_settings, remembered, page.store, queue=False, **quiet)
    demo.load(
        restore,
        [page.store],
        [
            page.conv_key,
            page.chatbot,
            page.traces,
            page.store,
            page.earlier,
            *inputs,
            page.keep_key,
            page.review.toggle,
        ],  # fmt: skip
        **quiet,
    ).then(show_status, inputs, status_outputs, **quiet).then(*refresh, **quiet)
    demo.unload(on_unload)
    # While the runtime warms up, the status line follows it; the timer stops once it is ready.
    warming = gr.Timer(2.0, active=chat.backends.warm_state not in ("", "ready"))

    def follow_warm_up(base_url, model, key, mode, top_k):
        state = chat.backends.warm_state
        done = state in ("", "ready") or "not available" in state
        return *show_status(base_url, model, key, mode, top_k), gr.Timer(active=not done)

    warming.tick(follow_warm_up, inputs, [*status_outputs, warming], **quiet)


def launch_options(max_upload_bytes: int = 20_000_000, *, demo: Any = None) -> dict[str, Any]:
    """launch() arguments shared by main() and the tests (Gradio 6 takes css in launch()).

    Given the `demo` from build_demo, also its other doors: the MCP server (unless settings turn it
    off) and the OpenAI-compatible API under /v1 (which answers 404 unless api_keys are set)."""
    options: dict[str, Any] = {
        "css": CSS,
        # No run history: Gradio would keep every request's inputs, the typed API key among them,
        # in the browser's localStorage.
        "run_history": False,
        # Only the example files are served by path; conversations' files are served from Gradio's
        # cache under random folder names, each copy deleted when its conversation ends (webui.files).
        "allowed_paths": [str(ASSETS)],
        # A hard stop well above the friendly per-file check (which answers in the chat).
        "max_file_size": max(4 * max_upload_bytes, 50_000_000),
        # Images and media only from the app: the chat shows markdown the LLM wrote (webui.headers).
        "app_kwargs": {"middleware": [Middleware(ContentSecurityPolicy)]},
    }
    if demo is not None:
        options["mcp_server"] = demo.chat_app.settings.mcp_server
        options["app_kwargs"]["routes"] = [openai_routes(demo.calls)]
    return options


def _example(text: str, name: str | None) -> dict[str, Any]:
    return {"text": text, "files": [str(ASSETS / name)] if name else []}


def _session(request: Any) -> str:
    return getattr(request, "session_hash", None) or "local"


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per HTTP call is noise
    settings = load_settings()
    demo = build_demo(settings, warm_up=True)
    limit = demo.chat_app.max_upload_bytes
    demo.queue(max_size=64).launch(**launch_options(limit, demo=demo))


if __name__ == "__main__":
    main()
