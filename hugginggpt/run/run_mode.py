"""What a run is given: the parts of the Pipeline it uses, what it does besides the usual (RunMode),
and how its tasks run (ExecutionSettings from the settings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings
from hugginggpt.costs.estimate import Estimator
from hugginggpt.endpoints import Credentials, Endpoint
from hugginggpt.files import urlguard
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.interface import LLM
from hugginggpt.run.cache import ResultCache
from hugginggpt.stages.execute import ExecutionSettings
from hugginggpt.stages.plan import Plan
from hugginggpt.stages.selection import Choice


class RunParts(Protocol):
    """What a run uses of the Pipeline that starts it (which has these): the run never imports it."""

    llm: LLM
    catalog: Catalog
    endpoint: Endpoint
    stack: Endpoint  # `endpoint` as every run's tasks call it: the result cache and the observer around it
    settings: Settings
    cache: ResultCache | None
    cache_scope: str | None
    credentials: Credentials
    estimator: Estimator

    def check_plan(self, plan: Plan, workspace: Workspace) -> list[str]: ...


@dataclass(frozen=True, kw_only=True)
class RunMode:
    """What a run does besides the usual: a given plan, given choices, where it stops."""

    plan: Plan | None = None  # given: no planning call
    choices: Mapping[int, Choice] = field(default_factory=dict)  # given: no selection for these tasks
    seeds: Mapping[int, int] = field(default_factory=dict)
    stop_after_select: bool = False
    answer: bool = True
    use_cache: bool = True
    header: Mapping[str, Any] = field(default_factory=dict)  # added to the trace


def execution_settings(s: Settings) -> ExecutionSettings:
    return ExecutionSettings(
        max_workers=s.max_workers,
        task_timeout=s.task_timeout,
        task_attempts=s.task_attempts,
        fetch_url=partial(urlguard.fetch, max_bytes=s.url_max_bytes) if s.allow_urls else None,
        max_text_arg_chars=s.max_text_arg_chars,
        max_output_chars=s.max_output_chars,
    )
