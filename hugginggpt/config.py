"""Settings, read in one place: defaults < YAML file < environment variables < explicit overrides.

The YAML file is HUGGINGGPT_CONFIG (or --config); keys are the field names below. Environment
variables are HUGGINGGPT_<FIELD> (e.g. HUGGINGGPT_LLM_BASE_URL), plus the usual OPENAI_API_KEY,
OPENAI_BASE_URL and HF_TOKEN.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

INFERENCE_MODES = ("local", "hosted", "hybrid")
CACHE_SCOPES = ("conversation", "process")  # see hugginggpt/cache.py


@dataclass(frozen=True)
class Settings:
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
    # Planning.
    shots: int | None = None  # few-shot demos in the planning prompt (None: all)
    max_plan_retries: int = 2
    history_tokens: int = 1500
    # Selection.
    top_k: int = 5
    catalog_paths: tuple[str, ...] = ()
    candidate_tokens: int = 120  # per candidate description in the selection prompt
    # Execution.
    max_workers: int = 4
    task_timeout: float = 300.0
    task_attempts: int = 2  # models tried per task before it fails for good
    allow_urls: bool = False
    url_max_bytes: int = 20 * 1024 * 1024
    workdir: str = "workspaces"
    # Results, seeds and review (README: "Review, re-run and replay").
    cache_dir: str = ""  # the result cache's folder; empty: <workdir>/.cache
    cache_max_bytes: int = 2 * 1024**3  # 0 turns the result cache off
    cache_scope: str = "conversation"  # or "process": entries shared by every conversation
    seed: int = 0  # the base from which sampling tasks' seeds are derived
    review: bool = False  # stop after planning and selection for a person to check the plan

    def __post_init__(self) -> None:
        if self.inference not in INFERENCE_MODES:
            raise ValueError(f"inference must be one of {', '.join(INFERENCE_MODES)}, not {self.inference!r}")
        if self.top_k < 1 or self.task_attempts < 1 or self.max_workers < 1:
            raise ValueError("top_k, task_attempts and max_workers must be at least 1")
        if self.max_plan_retries < 0 or self.history_tokens < 0 or self.llm_max_retries < 0:
            raise ValueError("max_plan_retries, history_tokens and llm_max_retries must not be negative")
        if self.task_timeout <= 0 or self.llm_timeout <= 0:
            raise ValueError("task_timeout and llm_timeout must be more than 0 seconds")
        if self.cache_scope not in CACHE_SCOPES:
            scopes = ", ".join(CACHE_SCOPES)
            raise ValueError(f"cache_scope must be one of {scopes}, not {self.cache_scope!r}")
        if self.cache_max_bytes < 0 or not 0 <= self.seed < 2**31:
            raise ValueError("cache_max_bytes must not be negative; seed is from 0 to 2**31 - 1")

    @property
    def uses_server(self) -> bool:
        return bool(self.llm_base_url or self.llm_api_key)

    def with_overrides(self, **values: Any) -> Settings:
        """A copy with the given values, ignoring the ones that are None."""
        return replace(self, **{k: v for k, v in values.items() if v is not None})


def load_settings(config_file: str | Path | None = None, environ: dict[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    path = config_file or env.get("HUGGINGGPT_CONFIG")
    if path:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as e:
            raise ValueError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: the config file must be a mapping of setting names to values")
        values.update(loaded)
    values.setdefault("llm_base_url", env.get("OPENAI_BASE_URL"))
    values.setdefault("llm_api_key", env.get("OPENAI_API_KEY"))
    values.setdefault("hf_token", env.get("HF_TOKEN"))
    for f in fields(Settings):
        if f.name == "catalog_paths":
            continue  # HUGGINGGPT_CATALOG is read by the catalog itself
        raw = env.get(f"HUGGINGGPT_{f.name.upper()}")
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
        return tuple(value.split(os.pathsep)) if isinstance(value, str) else tuple(value)
    if isinstance(default, bool):
        return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "on")
    if isinstance(default, int) or name == "shots":
        return int(value)
    if isinstance(default, float):
        return float(value)
    return value
