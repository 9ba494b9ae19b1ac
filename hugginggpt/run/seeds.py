"""Seeds for the tasks whose models sample: the same seed gives the same output on the same device.

Unless one is given (a plan file, an edit, a replayed trace), a task's seed is derived from the
settings' base seed, the task's id, type and arguments: the same request gives the same images (and
is served from the result cache), while two identical tasks in one plan still differ.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace

from hugginggpt import tasks as task_types
from hugginggpt.stages.plan import Plan, Task
from hugginggpt.stages.selection import Choice

MAX_SEED = 2**31 - 1  # what every generator takes


def samples(task: str) -> bool:
    spec = task_types.get(task)
    return spec is not None and spec.samples


def derived_seed(base: int, task: Task) -> int:
    text = json.dumps([base, task.id, task.task, task.args], sort_keys=True, ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") % MAX_SEED


def with_seeds(
    plan: Plan, choices: Mapping[int, Choice], base: int, given: Mapping[int, int] | None = None
) -> dict[int, Choice]:
    """Every choice, with a seed for each sampling task that has none: the given one, else derived."""
    given = given or {}
    seeded: dict[int, Choice] = {}
    for t in plan.tasks:
        choice = choices[t.id]
        if t.id in given:
            choice = replace(choice, seed=given[t.id])
        elif choice.seed is None and samples(t.task):
            choice = replace(choice, seed=derived_seed(base, t))
        seeded[t.id] = choice
    return seeded


def check_seed(value: object, where: str) -> int:
    """A seed from a file or a user: a whole number from 0 to MAX_SEED, or ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise ValueError(f"{where}: a seed is a whole number from 0 to {MAX_SEED}, not {value!r}")
    return value
