"""Reading a trace file back: the one reader for everything that runs a trace again (the `replay`
command, the app's "Run a trace again"). The file goes through bounded_file (size, depth) and comes
out as typed values: the request, the plan with the models that produced its outputs and their
seeds, and the output hashes recorded per task, to compare a replay with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hugginggpt.catalog import Catalog
from hugginggpt.files.bounded_file import MAX_BYTES, read_json
from hugginggpt.run.events import PickSource
from hugginggpt.stages.planfile import TASK_KEY, GivenPlan, PlanFileError, given_plan
from hugginggpt.stages.selection import Choice
from hugginggpt.tasks import TASKS

Hashes = tuple[tuple[str | None, str | None], ...]  # (kind, sha256) per output, in order


@dataclass(frozen=True)
class Trace:
    given: GivenPlan  # plan, choices (a model for every task, or none), seeds, request
    request_id: str | None = None
    recorded: Mapping[int, Hashes] = field(default_factory=dict)  # the tasks that finished, by id

    @property
    def request(self) -> str:
        return self.given.request or ""


def read_trace(path: Path, catalog: Catalog, *, max_bytes: int = MAX_BYTES) -> Trace:
    """The trace at `path`; a ValueError (FileRefused, PlanFileError) that says why it is no
    trace that can run again: too large or deep, not JSON, no plan, a plan that does not validate."""
    raw = read_json(path, max_bytes=max_bytes)
    if not isinstance(raw, dict) or not isinstance(raw.get("plan"), list):
        raise ValueError(f"{path} is not a trace with a plan (a run that failed before planning has none)")
    return parse_trace(raw, catalog)


def parse_trace(raw: dict[str, Any], catalog: Catalog) -> Trace:
    request_id = raw.get("request_id")
    return Trace(
        plan_from_trace(raw, catalog),
        request_id if isinstance(request_id, str) else None,
        _recorded(raw),
    )


def plan_from_trace(trace: dict[str, Any], catalog: Catalog) -> GivenPlan:
    """The trace's plan, each task with the model that produced its outputs (or the chosen one) and
    its seed. A task that had no model keeps none: it fails again, with no selection call."""
    tasks = _tasks(trace)
    raw_choices = trace.get("choices")
    recorded = raw_choices if isinstance(raw_choices, dict) else {}
    choices: dict[str, Any] = {}
    for key, choice in recorded.items():
        task = tasks.get(int(key), {}) if TASK_KEY.fullmatch(str(key)) else {}
        choice = choice if isinstance(choice, dict) else {}
        model = task.get("model") if task.get("status") == "done" else choice.get("model")
        seed = task.get("seed", choice.get("seed"))
        choices[key] = {"model": model, "seed": seed}
    given = given_plan({"plan": trace["plan"], "choices": choices}, catalog, reason="as in the trace")
    for t in given.plan.tasks:  # checked here, not only at Run: the review form shows the names
        if t.task not in TASKS:
            raise PlanFileError(f"task {t.id} of the trace has an unknown task type")
    request = trace.get("request") if isinstance(trace.get("request"), str) else ""
    modelless = {
        t.id: Choice(
            t.id,
            t.task,
            None,
            "no model ran it in the trace",
            (),
            PickSource.NO_CANDIDATE,
            given.seeds.get(t.id),
        )
        for t in given.plan.tasks
        if t.id not in given.choices
    }
    return GivenPlan(given.plan, {**given.choices, **modelless}, given.seeds, request)


def _tasks(trace: dict[str, Any]) -> dict[Any, dict[str, Any]]:
    tasks = trace.get("tasks")
    return {t.get("id"): t for t in tasks if isinstance(t, dict)} if isinstance(tasks, list) else {}


def _recorded(trace: dict[str, Any]) -> dict[int, Hashes]:
    """The output hashes of each task that finished in the trace."""
    recorded: dict[int, Hashes] = {}
    for task_id, task in _tasks(trace).items():
        outputs = task.get("outputs", [])
        if not isinstance(task_id, int) or task.get("status") != "done" or not isinstance(outputs, list):
            continue
        recorded[task_id] = tuple(
            (_text(o.get("kind")), _text(o.get("sha256"))) if isinstance(o, dict) else (None, None)
            for o in outputs
        )
    return recorded


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
