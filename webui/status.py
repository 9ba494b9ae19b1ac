"""The status line over the chat: which LLM, where models run, the catalog. Every visitor sees it,
so it never shows a key or a URL's credentials."""

from __future__ import annotations

from hugginggpt.config import Settings
from hugginggpt.factory import DEFAULT_SERVER_MODEL
from hugginggpt.llm_openai import OPENAI_BASE_URL, without_credentials


def status_line(s: Settings, *, endpoint: str, catalog_size: int, catalog_problems: int = 0) -> str:
    if s.uses_server:
        url = without_credentials(s.llm_base_url or OPENAI_BASE_URL)
        llm = f"{s.llm_model or DEFAULT_SERVER_MODEL} at {url}"
    else:
        llm = f"{s.llm_model or s.local_llm_model} (local transformers; no LLM server configured)"
    refused = f" ({catalog_problems} catalog entries refused: see the server log)" if catalog_problems else ""
    return (
        f"**LLM:** {llm} · **Models run:** {endpoint} · "
        f"**Catalog:** {catalog_size} models{refused} · top-K {s.top_k}"
    )
