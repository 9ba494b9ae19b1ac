"""The Settings panel's checks: each problem goes next to the field it concerns, not to the top of
the page; the status line says what will run."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hugginggpt.factory import DEFAULT_SERVER_MODEL
from hugginggpt.llm_openai import OPENAI_BASE_URL, without_credentials

from .session_settings import LLMChoice

if TYPE_CHECKING:
    from hugginggpt.config import Settings

    from .host import Host

FIELDS = ("base_url", "model", "top_k")


def field_problems(host: Host, choice: LLMChoice) -> dict[str, str]:
    """{field: problem} for each typed field that is refused on its own (no DNS look-up here)."""
    problems = {}
    for name in FIELDS:
        base = LLMChoice(inference=choice.inference)
        alone = replace(base, **{name: getattr(choice, name)})
        if name == "base_url":
            alone = replace(alone, api_key=choice.api_key)
        try:
            host.request_settings(alone, resolve=False)
        except ValueError as e:
            problems[name] = str(e)
    return problems


def status_for(host: Host, choice: LLMChoice, problems: dict[str, str]) -> str:
    """The status line for what a request would use; a refused field falls back to the server's value."""
    blank: dict[str, Any] = {name: None if name == "top_k" else "" for name in problems}
    usable = replace(choice, **blank)
    line = host.status(usable)
    return line + (" · **Settings:** fix the field marked in Settings" if problems else "")


def placeholders(s: Settings) -> dict[str, str]:
    """What an empty LLM field means: the server's own choice (the status line shows it too; a URL
    without its credentials)."""
    if not s.uses_server:
        return {"base_url": "none: a local model is the controller", "model": f"{s.local_llm_model} (local)"}
    url = without_credentials(s.llm_base_url or OPENAI_BASE_URL)
    return {
        "base_url": f"{url} (the server's)",
        "model": f"{s.llm_model or DEFAULT_SERVER_MODEL} (the server's)",
    }
