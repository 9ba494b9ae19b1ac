"""The JSON schemas of the LLM's structured replies: the plan (stage 1) and the model choice (stage 2).

Both are built per call from what is passed in, never from a table frozen at import: the task types
of the registry as it stands (task types that tools add included), the files of this conversation,
the candidates of this plan's tasks. The same schema goes to servers that take one (`response_format`)
and to the in-process LLM's grammar (llm_grammar.py), which can then only write replies inside it.

Every string, list and number is bounded, so every reply the schema admits is finite. What a schema
cannot say (a dependency on an earlier task, a reference listed in `dep`) is still checked by
plan.validate_plan, and the correction round stays for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hugginggpt.tasks import TaskSpec

MAX_ID = 999  # task ids and dependencies: three digits are plenty for a plan of at most PlanLimits.max_tasks
MAX_TEXT_CHARS = 2000  # a text argument (the request's own words, or a prompt with references in it)
MAX_NAME_CHARS = 200  # a file name when the files are not known
MAX_URL_CHARS = 2000
MAX_REASON_CHARS = 300  # why a model was chosen
# The few-shot demos' separators (json.dumps' defaults): the grammar allows no other whitespace, so
# the reply looks like the demos and its length is bounded by its content.
ITEM_SEPARATOR, KEY_SEPARATOR = ", ", ": "

REFERENCE = {"type": "string", "pattern": r"^<resource>-(0|[1-9][0-9]{0,2})$"}
ANY_FILE_NAME = {"type": "string", "pattern": rf'^[^<>"\\\n]{{1,{MAX_NAME_CHARS}}}$'}
URL = {"type": "string", "pattern": rf'^https?://[^\s"<>\\]{{1,{MAX_URL_CHARS}}}$'}
TEXT = {"type": "string", "maxLength": MAX_TEXT_CHARS}


def plan_schema(
    specs: Iterable[TaskSpec],
    *,
    files: Iterable[str] | None = None,
    allow_urls: bool = False,
    max_tasks: int = 30,
) -> dict[str, Any]:
    """The plan `{"tasks": [...]}`: each task one of the shapes of `specs` (its type, an integer id,
    a list of integer dependencies, and exactly its argument names, the required ones required).

    A media argument (image, audio, video) is a `<resource>-N` reference or a file: one of `files`
    when they are known (None: any plausible file name), or an http(s) URL when `allow_urls`."""
    media = _media_value(files, allow_urls)
    shapes = [_task_shape(spec, media, max_tasks) for spec in sorted(specs, key=lambda s: s.name)]
    return {
        "type": "object",
        "properties": {
            "tasks": {"type": "array", "items": {"anyOf": shapes}, "maxItems": max_tasks},
        },
        "required": ["tasks"],
        "additionalProperties": False,
    }


def _media_value(files: Iterable[str] | None, allow_urls: bool) -> dict[str, Any]:
    choices: list[dict[str, Any]] = [REFERENCE]
    if files is None:
        choices.append(ANY_FILE_NAME)
    else:
        names = sorted({name for name in files if name})
        if names:
            choices.append({"type": "string", "enum": names})
    if allow_urls:
        choices.append(URL)
    return choices[0] if len(choices) == 1 else {"anyOf": choices}


def _task_shape(spec: TaskSpec, media: dict[str, Any], max_tasks: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "task": {"type": "string", "enum": [spec.name]},
            "id": {"type": "integer", "minimum": 0, "maximum": MAX_ID},
            "dep": {
                "type": "array",
                "items": {"type": "integer", "minimum": -1, "maximum": MAX_ID},
                "maxItems": max_tasks,
            },
            "args": {
                "type": "object",
                "properties": {a.name: TEXT if a.kind == "text" else media for a in spec.args},
                "required": [a.name for a in spec.args if a.required],
                "additionalProperties": False,
            },
        },
        "required": ["task", "id", "dep", "args"],
        "additionalProperties": False,
    }


def selection_schema(offered: Mapping[int, Sequence[str]]) -> dict[str, Any]:
    """The model choice `{"<task id>": {"id": <model id>, "reason": <why>}}`: one entry for each
    task of `offered` (task id -> its candidates' model ids), naming one of that task's candidates."""
    return {
        "type": "object",
        "properties": {
            str(task_id): {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "enum": list(candidates)},
                    "reason": {"type": "string", "maxLength": MAX_REASON_CHARS},
                },
                "required": ["id", "reason"],
                "additionalProperties": False,
            }
            for task_id, candidates in offered.items()
        },
        "required": [str(task_id) for task_id in offered],
        "additionalProperties": False,
    }
