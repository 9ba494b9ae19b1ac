"""Prompt templates and few-shot demos, kept as YAML data files next to this module."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, StrictUndefined

HERE = Path(__file__).parent
_env = Environment(undefined=StrictUndefined, keep_trailing_newline=False, autoescape=False)


@cache
def templates(stage: str) -> dict[str, str]:
    return yaml.safe_load((HERE / f"{stage}.yaml").read_text(encoding="utf-8"))


@cache
def _template(stage: str, part: str) -> Any:
    return _env.from_string(templates(stage)[part])  # compiled once: prompts render on every request


def render(stage: str, part: str, **values: Any) -> str:
    return _template(stage, part).render(**values).strip()


@cache
def demos() -> list[dict[str, Any]]:
    return yaml.safe_load((HERE / "demos.yaml").read_text(encoding="utf-8"))


def demo_messages(shots: int | None = None) -> list[dict[str, str]]:
    """The first `shots` demos (all when None) as user/assistant message pairs."""
    picked = demos() if shots is None else demos()[:shots]
    messages = []
    for demo in picked:
        files = [{"kind": kind, "name": name, "new": True} for kind, name in (demo["files"] or {}).items()]
        messages.append(
            {"role": "user", "content": render("plan", "user", request=demo["request"], files=files)}
        )
        messages.append({"role": "assistant", "content": json.dumps({"tasks": demo["plan"]})})
    return messages
