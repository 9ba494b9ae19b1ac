"""The status line over the chat, in plain words: which LLM, where models run, how many models.
Every visitor sees it, so it never shows a key or a URL's credentials."""

from __future__ import annotations

from hugginggpt.config import Settings
from hugginggpt.factory import DEFAULT_SERVER_MODEL
from hugginggpt.llms.openai_compatible import OPENAI_BASE_URL, without_credentials
from webui.host.host import Host
from webui.host.session_settings import LLMChoice

# Where models run, per inference mode, as a person would say it (hugginggpt.modes has the details).
WHERE = {
    "local": "here, on this machine",
    "hosted": "on Hugging Face",
    "hybrid": "here first, then on Hugging Face",
    "remote": "on the expert server",
}
WHERE_WITH_EXPERTS = {"hybrid": "on the expert server first, then here, then on Hugging Face"}


def status_line(s: Settings, *, endpoint: str, catalog_size: int, catalog_problems: int = 0) -> str:
    """`endpoint`: the models' endpoint as it describes itself; the app's own (named by its mode) is
    said in plain words, another (a test's, an embedding app's) as it describes itself."""
    if s.uses_server:
        url = without_credentials(s.llm_base_url or OPENAI_BASE_URL)
        llm = f"{s.llm_model or DEFAULT_SERVER_MODEL} at {url}"
    else:
        llm = f"{s.llm_model or s.local_llm_model} (a local model: no LLM server is configured)"
    where = f"on {endpoint}"
    if endpoint.startswith(f"{s.inference}:") and s.inference in WHERE:
        where = (WHERE_WITH_EXPERTS if s.experts_url else WHERE).get(s.inference, WHERE[s.inference])
    refused = f" ({catalog_problems} catalog entries refused: see the server log)" if catalog_problems else ""
    return f"**Your LLM:** {llm} · models run {where} · {catalog_size} models{refused} · top-K {s.top_k}"


def for_host(host: Host, choice: LLMChoice) -> str:
    """The status line for what a request with `choice` would use on `host`, or its settings problem."""
    try:
        s = host.request_settings(choice, resolve=False)
    except ValueError as e:
        return f"**Settings problem:** {e}"
    endpoint = host.backends.endpoint_for(s.inference).describe()
    line = status_line(
        s, endpoint=endpoint, catalog_size=len(host.catalog), catalog_problems=host.refused_entries
    )
    warm = host.backends.warm_state
    return line + (f" · *{warm}*" if warm and warm != "ready" else "")
