"""Reading a plan while the LLM writes it: each task object is taken the moment its `}` arrives.

A small scanner over the streamed text follows strings and brackets; an object that closes directly
inside a list (the plan's list of tasks) and reads as JSON with a "task" key is a task. Whatever it
cannot read is left alone: the whole reply is still parsed and validated when it is complete, and
that verdict is the one that counts. Work stays linear in the reply and bounded by PlanLimits.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable
from typing import Any

from hugginggpt.stages.plan import (
    FileRules,
    Plan,
    PlanLimits,
    PlanParseError,
    Task,
    task_from_raw,
    validate_plan,
)


class TaskScanner:
    """Feed the reply piece by piece; each call returns the task objects completed by that piece."""

    def __init__(self, limits: PlanLimits | None = None) -> None:
        self.limits = limits or PlanLimits()
        self._pieces: list[str] = []
        self._starts: list[int] = []  # offset of each piece in the reply
        self._size = 0
        self._open: list[tuple[str, int]] = []  # open brackets: (char, offset of the bracket)
        self._in_string = self._escaped = False
        self._found = 0
        self._stopped = False  # past a limit: the whole-plan check will say why

    def feed(self, piece: str) -> list[dict[str, Any]]:
        if self._stopped:
            return []
        if self._size + len(piece) > self.limits.max_chars:
            self._stopped = True
            return []
        self._pieces.append(piece)
        self._starts.append(self._size)
        found = []
        for offset, char in enumerate(piece, start=self._size):
            raw = self._step(char, offset)
            if raw is not None:
                found.append(raw)
        self._size += len(piece)
        return found

    def _step(self, char: str, offset: int) -> dict[str, Any] | None:
        if self._in_string:
            if self._escaped:
                self._escaped = False
            elif char == "\\":
                self._escaped = True
            elif char == '"':
                self._in_string = False
            return None
        if char == '"':
            self._in_string = True
        elif char in "[{":
            self._open.append((char, offset))
            if len(self._open) > self.limits.max_depth:
                self._stopped = True
        elif char in "]}" and self._open:
            opened, begin = self._open.pop()
            in_list = bool(self._open) and self._open[-1][0] == "["
            if opened == "{" and char == "}" and in_list:
                return self._task_object(self._span(begin, offset + 1))
        return None

    def _span(self, begin: int, end: int) -> str:
        """The reply from `begin` to `end`, joining only the pieces it spans (an object's length:
        objects nest at most max_depth deep, so all of them together cost a bounded multiple of the
        reply)."""
        first = bisect_right(self._starts, begin) - 1
        last = bisect_right(self._starts, end - 1)
        text = "".join(self._pieces[first:last])
        base = self._starts[first]
        return text[begin - base : end - base]

    def _task_object(self, text: str) -> dict[str, Any] | None:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return None
        if not isinstance(value, dict) or "task" not in value or self._found >= self.limits.max_tasks:
            return None
        self._found += 1
        return value


def read_task(raw: dict[str, Any], index: int, accepted: Iterable[Task], rules: FileRules) -> Task | None:
    """The task if it may start before the plan is complete: valid on its own among the tasks
    `accepted` so far (known type, arguments that fit, dependencies and references only on them);
    None otherwise (it waits for the whole plan)."""
    earlier = list(accepted)
    try:
        task = task_from_raw(raw, index, known={t.id for t in earlier})
    except PlanParseError:
        return None
    if validate_plan(Plan([*earlier, task]), rules):
        return None
    return task
