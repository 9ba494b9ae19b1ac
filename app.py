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
from webui.calls import Calls
from webui.chat import ChatApp, LLMChoice
from webui.files import Publisher
from webui.headers import ContentSecurityPolicy
from webui.openai_api import routes as openai_routes

ROOT = Path(__file__).resolve().parent
ASSETS = ROOT / "assets"
CSS = """
#status { font-size: 0.9em; opacity: 0.85; }
#chat { min-height: 520px; }
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
        "Hugging Face models for them, runs them and answers. Attach images or audio with the clip."
    )
    if settings.uses_oauth:  # a signed-in visitor's token pays for their hosted calls and ZeroGPU quota
        gr.LoginButton(elem_id="login")
    status = gr.Markdown(elem_id="status")
    chatbot = gr.Chatbot(
        value=chat.welcome(),
        label="Conversation",
        elem_id="chat",
        height=620,
        autoscroll=True,
        group_consecutive_messages=False,
    )
    with gr.Row():
        # No file_types: Gradio would refuse other files with a pop-up before the handler runs;
        # webui.uploads answers in the chat instead, for every kind of bad file alike.
        box = gr.MultimodalTextbox(
            file_count="multiple",
            show_label=False,
            scale=8,
            placeholder="Type a request; attach images or audio.",
            elem_id="request",
        )
        stop = gr.Button("Stop", variant="stop", scale=1, min_width=80, elem_id="stop")
    traces = gr.File(
        label="Trace of each request (JSON)", file_count="multiple", interactive=False, elem_id="traces"
    )
    gr.Examples(
        examples=[[_example(text, name)] for text, name in EXAMPLES],
        inputs=[box],
        label="Examples (files in assets/)",
    )
    with gr.Accordion("Settings", open=False, elem_id="settings"):
        gr.Markdown("These apply to this browser session only; the API key is never stored or logged.")
        with gr.Row():
            base_url = gr.Textbox(
                label="LLM base URL",
                value=settings.llm_base_url or "",
                placeholder="https://api.openai.com/v1 (OpenAI-compatible)",
            )
            model = gr.Textbox(
                label="LLM model",
                value=settings.llm_model or "",
                placeholder="gpt-4o-mini, Qwen/Qwen2.5-72B-Instruct, ...",
            )
            key = gr.Textbox(
                label="API key", type="password", value="", placeholder="empty: the server's key, if any"
            )
        with gr.Row():
            mode = gr.Radio(
                list(INFERENCE_MODES),
                value=settings.inference,
                label="Where models run",
                info=" · ".join(f"{name}: {help}" for name, (_, help) in INFERENCE_MODES.items()),
            )
            top_k = gr.Slider(1, 10, step=1, value=settings.top_k, label="Candidate models per task (top-K)")
    return Page(status, chatbot, box, stop, traces, base_url, model, key, mode, top_k)


def _wire(gr: Any, demo: Any, page: Page, chat: ChatApp, concurrency: int) -> None:
    from gradio import utils

    publisher = Publisher(Path(utils.get_upload_folder()))

    def choice(base_url: str, model: str, key: str, mode: str, top_k: float) -> LLMChoice:
        return LLMChoice(base_url or "", model or "", key or "", mode or "", top_k)

    def respond(message: dict[str, Any], base_url, model, key, mode, top_k, request: gr.Request):
        yield from answer(message, choice(base_url, model, key, mode, top_k), request, None)

    def respond_signed_in(
        message: dict[str, Any],
        base_url,
        model,
        key,
        mode,
        top_k,
        request: gr.Request,
        token: gr.OAuthToken | None,
    ):
        the_choice = choice(base_url, model, key, mode, top_k)
        yield from answer(message, the_choice, request, token.token if token else None)

    def answer(message: dict[str, Any], the_choice: LLMChoice, request: Any, hf_token: str | None):
        session = _session(request)
        client = getattr(getattr(request, "client", None), "host", "") or ""
        for messages, trace_files, running in chat.respond(
            session, message, the_choice, client=client, hf_token=hf_token
        ):
            conv = chat.conversations.find(session)
            if conv is None or conv.ended:  # the page was left: nothing more is served for it
                return
            yield (
                publisher.messages(conv, messages),
                [publisher.file(conv, t) for t in trace_files],
                gr.MultimodalTextbox(value=None, interactive=not running),
            )

    def on_stop(request: gr.Request) -> None:
        chat.stop(_session(request))

    def on_clear(request: gr.Request):
        chat.reset(_session(request))
        return chat.welcome(), None

    def on_unload(request: gr.Request) -> None:
        chat.drop(_session(request))

    def show_status(base_url, model, key, mode, top_k) -> str:
        return chat.status(choice(base_url, model, key, mode, top_k))

    inputs = page.choice_inputs
    run = page.box.submit(
        # Gradio asks for sign-in routes only when a handler takes a token: off a Space they need a login.
        respond_signed_in if chat.settings.uses_oauth else respond,
        [page.box, *inputs],
        [page.chatbot, page.traces, page.box],
        api_name="chat",
        api_visibility="undocumented",  # callable by gradio_client, but not an MCP tool
        concurrency_limit=concurrency,
        show_progress="hidden",
    )
    run.then(lambda: gr.MultimodalTextbox(interactive=True), None, page.box, api_name=False)
    page.stop.click(on_stop, None, None, queue=False, api_name="stop", api_visibility="undocumented")
    page.chatbot.clear(
        on_clear,
        None,
        [page.chatbot, page.traces],
        api_name="new_conversation",
        api_visibility="undocumented",
    )
    for field in (page.base_url, page.model, page.key):  # typed fields: on leaving them, not on every key
        gr.on(
            [field.blur, field.submit],
            show_status,
            inputs,
            page.status,
            api_name=False,
            show_progress="hidden",
        )
    for field in (page.mode, page.top_k):
        field.change(show_status, inputs, page.status, api_name=False, show_progress="hidden")
    demo.load(show_status, inputs, page.status, api_name=False)
    # While the runtime warms up, the status line follows it; the timer stops once it is ready.
    warming = gr.Timer(2.0, active=chat.backends.warm_state not in ("", "ready"))

    def follow_warm_up(base_url, model, key, mode, top_k):
        done = chat.backends.warm_state in ("", "ready") or "not available" in chat.backends.warm_state
        return show_status(base_url, model, key, mode, top_k), gr.Timer(active=not done)

    warming.tick(follow_warm_up, inputs, [page.status, warming], api_name=False, show_progress="hidden")
    demo.unload(on_unload)


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
