"""Settings, read in one place: defaults < YAML file < environment variables < explicit overrides.

The YAML file is HUGGINGGPT_CONFIG (or --config); keys are the field names below. Environment
variables are HUGGINGGPT_<FIELD> (e.g. HUGGINGGPT_LLM_BASE_URL, HUGGINGGPT_CATALOG for
catalog_paths), plus the usual OPENAI_API_KEY, OPENAI_BASE_URL, HF_TOKEN, and the deployment's
SPACE_ID and GRADIO_SERVER_NAME. The local runtime (models_local) reads its own few variables,
listed in the README.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from hugginggpt.files.bounded_file import read_yaml
from hugginggpt.modes import INFERENCE_MODES

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "")
# Settings whose environment variable is not HUGGINGGPT_<FIELD>: the ecosystem's usual names.
ENV_ALIASES = {
    "llm_base_url": "OPENAI_BASE_URL",
    "llm_api_key": "OPENAI_API_KEY",
    "hf_token": "HF_TOKEN",
    "space_id": "SPACE_ID",
    "server_name": "GRADIO_SERVER_NAME",
    "oauth_client_id": "OAUTH_CLIENT_ID",
}
ENV_NAMES = {"catalog_paths": "HUGGINGGPT_CATALOG"}  # HUGGINGGPT_<FIELD> would read oddly
CACHE_SCOPES = ("conversation", "process")  # see hugginggpt/run/cache.py


@dataclass(frozen=True)
class Settings:
    """Grouped by audience (README: "Settings"): core, read by the controller for every run, from the
    CLI, the library or any door; app, the Gradio page, its conversations and visitors; server, the
    process that serves: where it listens, who reaches it, the API doors and the metrics route.
    The sections are comments only: every setting stays `settings.<name>` and HUGGINGGPT_<NAME>."""

    # ==== core: the controller, whoever runs it (hugginggpt/ reads only this section)
    # The controller LLM: an OpenAI-compatible server, or a local transformers model when unset.
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    llm_timeout: float = 60.0
    llm_max_retries: int = 2
    local_llm_model: str = "Qwen/Qwen2.5-1.5B-Instruct"
    # Where expert models run.
    inference: str = "hybrid"
    hf_token: str | None = field(default=None, repr=False)
    hf_provider: str | None = None
    experts_url: str | None = None  # an expert server (models_local.serve): mode "remote", first in hybrid
    # Planning.
    shots: int | None = None  # few-shot demos in the planning prompt (None: all)
    max_plan_retries: int = 2
    history_tokens: int = 1500
    # Selection.
    top_k: int = 5
    catalog_paths: tuple[str, ...] = ()
    candidate_tokens: int = 120  # per candidate description in the selection prompt
    # Limits on the models a request may use (limits.py); 0 or empty: none.
    max_model_gb: float = 0.0  # the weights of one model run on this machine
    max_download_gb: float = 0.0  # everything one request downloads
    licenses: tuple[str, ...] = ()  # the model licences allowed, e.g. mit, apache-2.0
    # Execution.
    max_workers: int = 4
    stream_execution: bool = True  # tasks start while the LLM writes the plan (streaming_run.py)
    task_timeout: float = 300.0
    task_attempts: int = 2  # models tried per task before it fails for good
    allow_urls: bool = False
    url_max_bytes: int = 20 * 1024 * 1024
    workdir: str = "workspaces"
    # Budgets: work and memory per request stay bounded whatever a visitor, the LLM or a model sends.
    max_request_chars: int = 20_000
    llm_call_seconds: float = 120.0  # a whole LLM call, also from a server that trickles tokens
    llm_max_reply_chars: int = 200_000  # a longer planning or selection reply is cut
    max_plan_chars: int = 100_000
    max_plan_tasks: int = 30
    max_text_arg_chars: int = 10_000  # a task's text argument, references filled in
    max_output_chars: int = 100_000  # a model's text or data output
    answer_max_tokens: int = 2048  # asked of the server for the answer
    max_answer_chars: int = 50_000  # streamed to the page at most
    request_seconds: float = 900.0  # the whole request
    max_trace_field_chars: int = 20_000  # one prompt, reply or value in the trace file
    # Results, seeds and review (README: "Review, re-run and replay").
    cache_dir: str = ""  # the result cache's folder; empty: <workdir>/.cache
    cache_max_bytes: int = 2 * 1024**3  # 0 turns the result cache off
    cache_scope: str = "conversation"  # or "process": entries shared by every conversation
    seed: int = 0  # the base from which sampling tasks' seeds are derived
    review: bool = False  # stop after planning and selection for a person to check the plan
    # Telemetry and cost of each run (README: "Traces, metrics and cost"). Traces go where the OTEL_*
    # variables say.
    trace_content: bool = False  # prompts and replies on the spans too (never a visitor's keys)
    llm_input_price: float = 0.0  # per million input tokens, in the operator's currency; 0: no cost shown
    llm_output_price: float = 0.0  # per million output tokens

    # ==== app: the Gradio page, its conversations and its visitors
    allowed_local_llms: tuple[str, ...] = ()  # others a visitor of a public app may pick, besides the default
    app_max_upload_mb: float = 20.0  # per file
    app_concurrency: int = 8  # requests answered at once, across all sessions
    app_leave_grace_seconds: float = 120.0  # a left page's conversation leaves memory (kept on disk)
    resume_on_start: bool = True  # runs a restart cut off are continued once when the app starts
    app_retention_hours: float | None = None  # unused this long, deleted; None: 720 private, 24 public
    app_conversations_max_gb: float | None = None  # kept at most (oldest out); None: 5 public; 0: no cap
    app_secret: str | None = field(default=None, repr=False)  # the browser store's key (else generated)
    app_upload_quota_mb: float = 200.0  # bytes one address may upload to the page per upload_keep_hours
    app_upload_keep_hours: float = 3.0  # an upload no conversation took in is deleted after this
    oauth: bool | None = None  # "Sign in with Hugging Face"; None: on where the Space enables hf_oauth
    oauth_client_id: str | None = field(default=None, repr=False)  # set by a Space with hf_oauth
    visitor_daily_tokens: int = 0  # on a public app, LLM tokens one visitor may spend a day; 0: no limit

    # ==== server: where the process listens, who reaches it, the doors for other programs, /metrics
    space_id: str | None = None  # set on a Hugging Face Space
    server_name: str = "127.0.0.1"  # where the app listens (GRADIO_SERVER_NAME)
    public: bool | None = None  # None: public on a Space or when listening beyond loopback
    # Proxies whose X-Forwarded-For is believed (addresses or networks, comma-separated; "*": the one hop
    # in front, whatever its address). Empty: none, except on a Space, whose own proxy is the only way in.
    trusted_proxies: tuple[str, ...] = ()
    caller_ipv6_prefix: int = 64  # IPv6 callers are counted per network of this prefix (a household's /64)
    # Doors for other programs (the app only): the MCP server, and the OpenAI-compatible API, which
    # is off unless bearer tokens are set (HUGGINGGPT_API_KEYS, comma-separated).
    mcp_server: bool = True
    api_keys: tuple[str, ...] = field(default=(), repr=False)
    metrics: bool = False  # Prometheus metrics at /metrics on the app's port
    metrics_key: str | None = field(default=None, repr=False)  # a bearer token /metrics then asks for

    def __post_init__(self) -> None:
        if self.inference not in INFERENCE_MODES:
            raise ValueError(f"inference must be one of {', '.join(INFERENCE_MODES)}, not {self.inference!r}")
        if self.experts_url and not self.experts_url.startswith(("http://", "https://")):
            raise ValueError(f"experts_url must be an http(s) URL, not {self.experts_url!r}")
        if self.inference == "remote" and not self.experts_url:
            raise ValueError(
                "inference mode remote needs an expert server: set experts_url (HUGGINGGPT_EXPERTS_URL)"
            )
        if self.top_k < 1 or self.task_attempts < 1 or self.max_workers < 1:
            raise ValueError("top_k, task_attempts and max_workers must be at least 1")
        if self.max_plan_retries < 0 or self.history_tokens < 0 or self.llm_max_retries < 0:
            raise ValueError("max_plan_retries, history_tokens and llm_max_retries must not be negative")
        if self.task_timeout <= 0 or self.llm_timeout <= 0:
            raise ValueError("task_timeout and llm_timeout must be more than 0 seconds")
        budgets: tuple[int, ...] = (self.max_request_chars, self.llm_max_reply_chars, self.max_plan_chars)
        budgets += (self.max_plan_tasks, self.max_text_arg_chars, self.max_output_chars)
        budgets += (self.answer_max_tokens, self.max_answer_chars, self.max_trace_field_chars)
        if min(budgets) < 1 or self.llm_call_seconds <= 0 or self.request_seconds <= 0:
            raise ValueError("every budget (max_*, *_seconds, answer_max_tokens) must be more than 0")
        if self.app_max_upload_mb <= 0 or self.app_concurrency < 1:
            raise ValueError("app_max_upload_mb must be more than 0 and app_concurrency at least 1")
        if self.app_upload_quota_mb <= 0 or self.app_upload_keep_hours <= 0:
            raise ValueError("app_upload_quota_mb and app_upload_keep_hours must be more than 0")
        if self.cache_scope not in CACHE_SCOPES:
            scopes = ", ".join(CACHE_SCOPES)
            raise ValueError(f"cache_scope must be one of {scopes}, not {self.cache_scope!r}")
        if not 1 <= self.caller_ipv6_prefix <= 128:
            raise ValueError("caller_ipv6_prefix must be from 1 to 128")
        if min(self.llm_input_price, self.llm_output_price, self.visitor_daily_tokens) < 0:
            raise ValueError("llm_*_price and visitor_daily_tokens must not be negative")
        if self.max_model_gb < 0 or self.max_download_gb < 0:
            raise ValueError("max_model_gb and max_download_gb must not be negative (0: no limit)")
        if self.app_retention_hours is not None and self.app_retention_hours <= 0:
            raise ValueError("app_retention_hours must be more than 0")
        if self.app_conversations_max_gb is not None and self.app_conversations_max_gb < 0:
            raise ValueError("app_conversations_max_gb must not be negative (0: no cap)")
        if self.cache_max_bytes < 0 or not 0 <= self.seed < 2**31:
            raise ValueError("cache_max_bytes must not be negative; seed is from 0 to 2**31 - 1")

    @property
    def uses_server(self) -> bool:
        return bool(self.llm_base_url or self.llm_api_key)

    @property
    def is_public(self) -> bool:
        """Whether strangers can reach the app: a Space, or a listener beyond loopback, unless the
        operator said otherwise with `public`."""
        if self.public is not None:
            return self.public
        return bool(self.space_id) or self.server_name.strip("[]") not in LOOPBACK_NAMES

    @property
    def uses_oauth(self) -> bool:
        return self.oauth if self.oauth is not None else bool(self.oauth_client_id)

    @property
    def proxies(self) -> tuple[str, ...]:
        """The proxies whose forwarded addresses are believed (webui.host.callers)."""
        return self.trusted_proxies or (("*",) if self.space_id else ())

    @property
    def max_upload_bytes(self) -> int:
        return int(self.app_max_upload_mb * 1_000_000)

    def with_overrides(self, **values: Any) -> Settings:
        """A copy with the given values, ignoring the ones that are None."""
        return replace(self, **{k: v for k, v in values.items() if v is not None})


def load_settings(config_file: str | Path | None = None, environ: dict[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    path = config_file or env.get("HUGGINGGPT_CONFIG")
    if path:
        loaded = read_yaml(Path(path)) or {}  # FileRefused (a ValueError) says what is wrong
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: the config file must be a mapping of setting names to values")
        values.update(loaded)
    for name, variable in ENV_ALIASES.items():
        values.setdefault(name, env.get(variable) or None)
    for f in fields(Settings):
        raw = env.get(ENV_NAMES.get(f.name, f"HUGGINGGPT_{f.name.upper()}"))
        if raw is not None:
            values[f.name] = raw
    unknown = set(values) - {f.name for f in fields(Settings)}
    if unknown:
        raise ValueError(f"unknown settings: {', '.join(sorted(unknown))}")
    try:
        return Settings(**{k: _coerce(k, v) for k, v in values.items() if v is not None})
    except TypeError as e:  # e.g. a list where a number belongs: a bad value, like the others
        raise ValueError(f"a setting has a value of the wrong type: {e}") from None


def _coerce(name: str, value: Any) -> Any:
    default = next(f.default for f in fields(Settings) if f.name == name)
    if name == "catalog_paths":
        paths = value.split(os.pathsep) if isinstance(value, str) else value
        return tuple(str(p) for p in paths if str(p).strip())
    if name in ("allowed_local_llms", "api_keys", "trusted_proxies", "licenses"):
        names = value.split(",") if isinstance(value, str) else value
        return tuple(str(n).strip() for n in names if str(n).strip())
    if isinstance(default, bool) or name in ("public", "oauth"):
        return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "on")
    if name in ("app_retention_hours", "app_conversations_max_gb"):
        return float(value)
    if isinstance(default, int) or name == "shots":
        return int(value)
    if isinstance(default, float):
        return float(value)
    if name in ENV_ALIASES and isinstance(value, str) and not value.strip():
        return None
    return value
