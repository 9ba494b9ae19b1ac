"""The Settings panel's checks: each problem goes next to the field it concerns, not to the top of
the page; the status line says what will run; what a browser saved is read back valid (`restored`)."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hugginggpt.factory import DEFAULT_SERVER_MODEL
from hugginggpt.llms.openai_compatible import OPENAI_BASE_URL, without_credentials
from hugginggpt.modes import INFERENCE_MODES
from webui.host.session_settings import MAX_TOP_K, LLMChoice
from webui.page import status

if TYPE_CHECKING:
    from hugginggpt.config import Settings
    from webui.host.host import Host

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
    line = status.for_host(host, usable)
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


LABELS = {
    "mode": "Where models run",
    "top_k": "Candidate models per task (top-K)",
    "max_model_gb": "Largest model (GB)",
    "max_download_gb": "Most to download per request (GB)",
    "licenses": "Licences allowed",
}
_LICENCE = re.compile(r"^[a-z0-9][a-z0-9.+_-]{0,63}$")  # the Hub's licence ids: mit, apache-2.0, cc-by-4.0


def restored(stored: dict[str, Any], s: Settings) -> tuple[dict[str, Any], list[str]]:
    """The Settings panel's values from what a browser saved (webui.page.saved), and a note for each stored
    value that was not valid and was corrected (the person sees what changed, nothing is dropped
    silently). A field never saved takes the server's value."""
    values: dict[str, Any] = {name: _text(stored.get(name)) for name in ("base_url", "model", "api_key")}
    values["review"] = bool(stored.get("review", s.review))
    notes: list[str] = []

    def corrected(name: str, why: str, now: Any) -> Any:
        notes.append(
            f"{LABELS[name]}: the saved `{stored[name]}` {why}; now {now if now != '' else 'empty'}."
        )
        return now

    mode = stored.get("mode") or s.inference
    values["mode"] = mode if mode in INFERENCE_MODES else corrected("mode", _one_of(), s.inference)
    values["top_k"] = s.top_k if stored.get("top_k") in (None, "") else _restored_top_k(stored, s, corrected)
    for name, server in (("max_model_gb", s.max_model_gb), ("max_download_gb", s.max_download_gb)):
        number = _number(stored.get(name, server))
        values[name] = number if number is not None else corrected(name, "is not a size in GB", server)
    values["licenses"] = _restored_licences(stored, s, corrected)
    return values, notes


def _restored_top_k(stored: dict[str, Any], s: Settings, corrected: Any) -> int:
    number = _number(stored["top_k"])
    if number is not None and number.is_integer() and 1 <= number <= MAX_TOP_K:
        return int(number)
    why = f"is not a whole number from 1 to {MAX_TOP_K}"
    return corrected("top_k", why, s.top_k if number is None else min(MAX_TOP_K, max(1, round(number))))


def _restored_licences(stored: dict[str, Any], s: Settings, corrected: Any) -> str:
    if "licenses" not in stored:
        return ",".join(s.licenses)
    names = [x.strip().lower() for x in _text(stored["licenses"]).split(",") if x.strip()]
    kept = [x for x in names if _LICENCE.match(x)]
    if len(kept) == len(names):
        return ",".join(kept)
    bad = ", ".join(f"`{x}`" for x in names if x not in kept)
    return corrected("licenses", f"names what is no licence id ({bad})", ",".join(kept))


def _one_of() -> str:
    return f"is not one of {', '.join(INFERENCE_MODES)}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _number(value: Any) -> float | None:
    """A finite number not below 0, from what a browser sent (a number or its text)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None
