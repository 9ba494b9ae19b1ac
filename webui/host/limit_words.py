"""How a refusal names the limit that would let a task run, for the reader of each door
(hugginggpt.costs.limits.worded): the page's Settings fields; the API's and MCP's server settings (their
callers cannot set limits)."""

from __future__ import annotations

from hugginggpt.costs.limits import worded

PAGE = {
    "--max-model-gb": "Largest model (GB) {} in Settings",
    "--max-download-gb": "Most to download per request (GB) {} in Settings",
}
SERVER = {
    "--max-model-gb": "the server's max_model_gb {}",
    "--max-download-gb": "the server's max_download_gb {}",
}


def for_page(message: str) -> str:
    return worded(message, PAGE)


def for_server(message: str) -> str:
    return worded(message, SERVER)
