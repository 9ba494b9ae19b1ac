"""What a visitor typed in the Settings panel, merged over the server's settings for one request."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hugginggpt.config import Settings
from hugginggpt.files import urlguard
from hugginggpt.modes import INFERENCE_MODES


@dataclass(frozen=True)
class LLMChoice:
    """What a person typed in the settings panel (empty strings mean: the server's default)."""

    base_url: str = ""
    model: str = ""
    api_key: str = field(default="", repr=False)
    inference: str = ""
    top_k: int | float | str | None = None
    # Limits on the models (hugginggpt.costs.limits): a visitor may tighten the server's, never loosen them.
    max_model_gb: float | None = None
    max_download_gb: float | None = None
    licenses: str = ""  # comma-separated


def merge_settings(server: Settings, choice: LLMChoice, *, public: bool, resolve: bool = True) -> Settings:
    """The server's settings with this session's choices; ValueError (in the user's words) for bad input.

    On a public app a typed base URL must be a public address (`resolve=False` skips the DNS look-up,
    for the status line). The server's own key never goes to a URL somebody typed."""
    s = server
    base_url = choice.base_url.strip() or None
    key = choice.api_key.strip() or None
    if base_url and base_url != s.llm_base_url:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"The LLM base URL must start with http:// or https:// (got `{base_url}`).")
        if public and resolve:
            try:
                urlguard.check_url(base_url)
            except urlguard.URLRefused as e:
                raise ValueError(f"This app only talks to public LLM servers: {e}.") from None
        s = replace(s, llm_base_url=base_url, llm_api_key=key)
    elif key:
        s = replace(s, llm_api_key=key)
    model = choice.model.strip()
    if public and model and not s.uses_server and model != s.local_llm_model:
        allowed = (s.local_llm_model, *s.allowed_local_llms)
        if model not in allowed:
            # A visitor never names what the server loads from its disk or downloads.
            raise ValueError(
                f"Without an LLM server this app runs one of its own local models: {', '.join(allowed)}. "
                "To use another model, set an LLM base URL."
            )
    mode = choice.inference or s.inference
    if mode not in INFERENCE_MODES:
        raise ValueError(f"Inference mode must be one of {', '.join(INFERENCE_MODES)}.")
    top_k = s.top_k if choice.top_k is None or choice.top_k == "" else _top_k(choice.top_k)
    s = replace(s, llm_model=model or s.llm_model, inference=mode, top_k=top_k)
    return with_limits(s, choice)


def with_limits(s: Settings, choice: LLMChoice) -> Settings:
    """The server's limits, tightened by the visitor's: the smaller size, the licences both allow."""

    def tighter(server: float, typed: float | None) -> float:
        if not typed or typed < 0:
            return server
        return min(server, typed) if server else float(typed)

    typed = tuple(x.strip().lower() for x in choice.licenses.split(",") if x.strip())
    allowed = s.licenses
    if typed:
        allowed = tuple(x for x in typed if not s.licenses or x in {y.lower() for y in s.licenses})
        allowed = allowed or ("(none)",)  # no licence both allow: nothing fits, and the refusal says so
    return replace(
        s,
        max_model_gb=tighter(s.max_model_gb, choice.max_model_gb),
        max_download_gb=tighter(s.max_download_gb, choice.max_download_gb),
        licenses=allowed,
    )


MAX_TOP_K = 10  # candidates per task a visitor may ask for: each one lengthens the selection prompt


def _top_k(value: object) -> int:
    """A whole number from 1 to MAX_TOP_K, or ValueError in the person's words."""
    try:
        number = float(str(value))
    except ValueError:
        number = float("nan")
    if not (number.is_integer() and 1 <= number <= MAX_TOP_K):
        raise ValueError(
            f"Candidate models per task must be a whole number from 1 to {MAX_TOP_K} (got {value})."
        )
    return int(number)
