"""HuggingGPT in the browser: `python app.py`, also the Hugging Face Space entry point.

A thin adapter: webui.host.host holds what every door shares and admits every caller, webui.chat.engine runs
requests through the pipeline and webui.chat.render turns its events into chat messages; the page is
laid out in webui.page.layout, handled in webui.page.handlers and wired in webui.page.wiring (its CSS is
assets/page.css); this file builds the app around them and launches it. Honours GRADIO_SERVER_NAME
and GRADIO_SERVER_PORT (Gradio reads them in launch()) and every setting of hugginggpt.config,
among them HUGGINGGPT_APP_MAX_UPLOAD_MB and HUGGINGGPT_APP_CONCURRENCY.

The same port also serves MCP tools at /gradio_api/mcp/ (webui.doors.mcp_tools; HUGGINGGPT_MCP_SERVER=0
turns them off) and an OpenAI-compatible API under /v1 (webui.doors.openai_api; on when
HUGGINGGPT_API_KEYS is set). The concurrency limit covers those calls too.
"""

# No `from __future__ import annotations`: Gradio finds the gr.Request parameters by their annotation.
import webui.host.gpu  # noqa: F401  (first of all: it imports `spaces` before anything touches torch)

# isort: split
import logging
from pathlib import Path
from typing import Any

import gradio as gr
from starlette.middleware import Middleware

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings, load_settings
from hugginggpt.endpoints import Endpoint
from hugginggpt.llms.interface import LLM
from webui.chat import resume_runs
from webui.chat.engine import ChatApp
from webui.doors.calls import Calls
from webui.doors.openai_api import routes as openai_routes
from webui.host.callers import trust_no_forwarding_in_uvicorn
from webui.host.host import Host
from webui.host.upload_quota import UploadQuota
from webui.page.headers import ContentSecurityPolicy
from webui.page.metrics_route import route as metrics_route
from webui.page.proxy_warning import ProxyWarning
from webui.page.script import page_script
from webui.page.wiring import build_page

ROOT = Path(__file__).resolve().parent
ASSETS = ROOT / "assets"
CSS = (ASSETS / "page.css").read_text(encoding="utf-8")


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
    # (a conversation's own copies are deleted with it, and re-made while it is shown: webui.chat.files).
    keep = int(settings.app_upload_keep_hours * 3600)
    with gr.Blocks(title="HuggingGPT", delete_cache=(min(3600, keep), keep)) as demo:
        build_page(demo, host, chat, concurrency or settings.app_concurrency)
        if settings.mcp_server:
            from webui.doors.mcp_tools import register as register_mcp_tools

            register_mcp_tools(calls)
    demo.host = host  # for tests and embedding: what every door shares
    demo.chat_app = chat  # the conversations behind the page
    demo.calls = calls
    return demo


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
        # cache under random folder names, each copy deleted when its conversation ends (webui.chat.files).
        "allowed_paths": [str(ASSETS)],
        # A hard stop well above the friendly per-file check (which answers in the chat).
        "max_file_size": max(4 * max_upload_bytes, 50_000_000),
        # Images and media only from the app: the chat shows markdown the LLM wrote (webui.page.headers).
        "app_kwargs": {"middleware": [Middleware(ContentSecurityPolicy)]},
    }
    trust_no_forwarding_in_uvicorn()  # who is calling is the app's decision (webui.host.callers)
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


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per HTTP call is noise
    settings = load_settings()
    demo = build_demo(settings, warm_up=True)
    limit = demo.host.max_upload_bytes
    demo.queue(max_size=64).launch(**launch_options(limit, demo=demo))


if __name__ == "__main__":
    main()
