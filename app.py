"""HuggingGPT in the browser: `python app.py`, also the Hugging Face Space entry point.

A thin adapter: webui.chat runs requests through the pipeline and webui.render turns its events
into chat messages; this file lays out the page and wires the events. Honours GRADIO_SERVER_NAME
and GRADIO_SERVER_PORT (Gradio reads them in launch()) and every setting of hugginggpt.config,
among them HUGGINGGPT_APP_MAX_UPLOAD_MB and HUGGINGGPT_APP_CONCURRENCY.
"""

# No `from __future__ import annotations`: Gradio finds the gr.Request parameters by their annotation.
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.middleware import Middleware

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings, load_settings
from hugginggpt.endpoints import Endpoint
from hugginggpt.llm import LLM
from hugginggpt.modes import INFERENCE_MODES
from webui.chat import ChatApp, LLMChoice
from webui.headers import ContentSecurityPolicy

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
):
    """The Gradio app. Tests inject a catalog, an endpoint (or local tiny models) and an LLM URL."""
    import gradio as gr

    settings = settings or load_settings()
    chat = ChatApp(
        settings,
        catalog=catalog,
        endpoint=endpoint,
        llm=llm,
        max_upload_bytes=max_upload_bytes,
        public_llm_only=public_llm_only,
    )
    # delete_cache: Gradio's copies of uploads and outputs are removed after a day (checked hourly).
    with gr.Blocks(title="HuggingGPT", delete_cache=(3600, 86400)) as demo:
        page = _layout(gr, settings, chat)
        _wire(gr, demo, page, chat, concurrency or settings.app_concurrency)
    demo.chat_app = chat  # for tests and embedding: the conversations behind the page
    return demo


def _layout(gr: Any, settings: Settings, chat: ChatApp) -> Page:
    gr.Markdown(
        "## HuggingGPT\nAsk for something that needs models: the controller LLM plans tasks, picks "
        "Hugging Face models for them, runs them and answers. Attach images or audio with the clip."
    )
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
    publish = _publisher(chat.workdir)

    def choice(base_url: str, model: str, key: str, mode: str, top_k: float) -> LLMChoice:
        return LLMChoice(base_url or "", model or "", key or "", mode or "", top_k)

    def respond(message: dict[str, Any], base_url, model, key, mode, top_k, request: gr.Request):
        session = _session(request)
        for messages, trace_files, running in chat.respond(
            session, message, choice(base_url, model, key, mode, top_k)
        ):
            yield (
                publish(messages),
                [publish_file(t) for t in trace_files],
                gr.MultimodalTextbox(value=None, interactive=not running),
            )

    def publish_file(path: str) -> str:
        return publish([{"content": {"path": path}}])[0]["content"]["path"]

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
        respond,
        [page.box, *inputs],
        [page.chatbot, page.traces, page.box],
        api_name="chat",
        concurrency_limit=concurrency,
        show_progress="hidden",
    )
    run.then(lambda: gr.MultimodalTextbox(interactive=True), None, page.box, api_name=False)
    page.stop.click(on_stop, None, None, queue=False, api_name="stop")
    page.chatbot.clear(on_clear, None, [page.chatbot, page.traces], api_name="new_conversation")
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
    demo.unload(on_unload)


def launch_options(max_upload_bytes: int = 20_000_000) -> dict[str, Any]:
    """launch() arguments shared by main() and the tests (Gradio 6 takes css in launch())."""
    return {
        "css": CSS,
        # Only the example files are served by path; conversations' files are served from Gradio's
        # cache under unguessable content-hash names, never by their workspace path.
        "allowed_paths": [str(ASSETS)],
        # A hard stop well above the friendly per-file check (which answers in the chat).
        "max_file_size": max(4 * max_upload_bytes, 50_000_000),
        # Images and media only from the app: the chat shows markdown the LLM wrote (webui.headers).
        "app_kwargs": {"middleware": [Middleware(ContentSecurityPolicy)]},
    }


def _example(text: str, name: str | None) -> dict[str, Any]:
    return {"text": text, "files": [str(ASSETS / name)] if name else []}


def _session(request: Any) -> str:
    return getattr(request, "session_hash", None) or "local"


def _publisher(workdir: Path):
    """Gradio copies a returned file into its cache only from the working directory, the temp dir or
    allowed_paths. Listing the workspaces in allowed_paths would serve every conversation's files to
    anyone with the path, so a workdir elsewhere (e.g. /data on a Space) is copied into the cache here."""
    reachable = any(workdir.is_relative_to(Path(d).resolve()) for d in (os.getcwd(), tempfile.gettempdir()))

    def publish(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if reachable:
            return messages
        from gradio import processing_utils, utils

        out = []
        for m in messages:
            content = m.get("content")
            if (
                isinstance(content, dict)
                and "path" in content
                and Path(content["path"]).is_relative_to(workdir)
            ):
                cached = processing_utils.save_file_to_cache(content["path"], utils.get_upload_folder())
                m = {**m, "content": {**content, "path": cached}}
            out.append(m)
        return out

    return publish


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per HTTP call is noise
    settings = load_settings()
    demo = build_demo(settings)
    limit = demo.chat_app.max_upload_bytes
    demo.queue(max_size=64).launch(**launch_options(limit))


if __name__ == "__main__":
    main()
