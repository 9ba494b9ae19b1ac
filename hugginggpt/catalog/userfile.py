"""User catalog files (YAML or JSONL): entries checked one by one, each problem with file and line.

An entry names a model for a task and any facts about it. One with the same task and id as an
earlier card overrides it field by field (the rest is kept), so a user can point a shipped model
at their own server with two lines. `path:` (a local folder, relative to the file) and
`endpoint_url:` (the model's own inference server) make models that need no Hub at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from hugginggpt.catalog.card import ModelCard, ProviderRoute
from hugginggpt.catalog.model_ids import hub_id_problem
from hugginggpt.catalog.tools import parse_tool
from hugginggpt.files.bounded_file import FileRefused, check_shape, parse_json
from hugginggpt.tasks import TASKS

FIELDS = set(ModelCard.__dataclass_fields__)
INT_FIELDS = ("downloads", "likes", "size_bytes")
STR_FIELDS = ("id", "task", "description", "library", "path", "endpoint_url", "license")
LIST_FIELDS = ("languages", "datasets", "tags")
BOOL_FIELDS = ("local", "counts_known")
ROUTE_FIELDS = ("provider", "status", "task")  # each entry of `providers`, as refresh writes it


@dataclass(frozen=True)
class Entry:
    """A checked entry: only the fields the user wrote, ready to merge over an earlier card."""

    fields: dict[str, Any]

    @property
    def key(self) -> tuple[str, str]:
        return self.fields["task"], self.fields["id"]


def read_user_file(path: Path) -> tuple[list[Entry], list[str]]:
    """Entries of one user file and the problems found ("file:line: message")."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        return [], [f"{path}:0: cannot read the file ({err.strerror or err})"]
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:  # YAML is parsed whole: the file adds nothing
            line = data[: err.start].count(b"\n") + 1
            return [], [f"{path}:{line}: not UTF-8 text (byte {data[err.start]:#04x})"]
        raw, problems = _yaml_items(path, text)
    else:
        raw, problems = _jsonl_items(path, data)
    entries = []
    for line, item in raw:
        where = f"{path}:{line}"
        fields, errors, warnings = check(item, base=path.parent)
        problems.extend(f"{where}: {e}" for e in errors)
        problems.extend(f"{where}: warning: {w}" for w in warnings)
        if not errors:
            entries.append(Entry(fields))
    return entries, problems


def _jsonl_items(path: Path, data: bytes) -> tuple[list[tuple[int, Any]], list[str]]:
    items, problems = [], []
    for n, raw in enumerate(data.split(b"\n"), 1):  # decoded line by line: one bad byte costs one line
        try:
            line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
        except UnicodeDecodeError as err:
            problems.append(f"{path}:{n}: not UTF-8 text (byte {raw[err.start]:#04x})")
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            items.append((n, parse_json(line, f"{path}:{n}")))
        except FileRefused as err:
            problems.append(str(err))
    return items, problems


def _yaml_items(path: Path, text: str) -> tuple[list[tuple[int, Any]], list[str]]:
    """A list of entries, or a mapping with a `models:` list; each entry with its line number."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        return [], [f"{path}:{line}: not valid YAML ({getattr(err, 'problem', None) or err})"]
    except RecursionError:
        return [], [f"{path}:0: not valid YAML (nested too deeply)"]
    if root is None:
        return [], []
    seq = root
    if isinstance(root, yaml.MappingNode):
        seq = next((v for k, v in root.value if k.value == "models"), None)
        if seq is None:
            return [], [f"{path}:{root.start_mark.line + 1}: expected a list of models or a `models:` list"]
    if not isinstance(seq, yaml.SequenceNode):
        return [], [f"{path}:{seq.start_mark.line + 1}: expected a list of models"]
    loader = yaml.SafeLoader("")
    items, problems = [], []
    for node in seq.value:
        line = node.start_mark.line + 1
        try:
            item = loader.construct_document(node)
            check_shape(item, f"{path}:{line}", string_keys=False)  # unknown keys get a warning
            items.append((line, item))
        except FileRefused as err:
            problems.append(str(err))
        except yaml.YAMLError as err:
            problems.append(f"{path}:{line}: cannot read this entry ({getattr(err, 'problem', None) or err})")
        except RecursionError:
            problems.append(f"{path}:{line}: cannot read this entry (nested too deeply)")
    return items, problems


# The Hub's own names for fields, as a model's JSON from the Hub API has them.
ALIASES = {"pipeline_tag": "task", "library_name": "library", "modelId": "id"}


def check(item: Any, *, base: Path) -> tuple[dict[str, Any], list[str], list[str]]:
    """The entry's fields, normalised; what is wrong with it (the entry is refused); and warnings
    (the entry is kept): fields this catalog does not know are ignored with a warning."""
    if not isinstance(item, dict):
        return {}, [f"an entry must be a mapping of fields, got {type(item).__name__}"], []
    item = {ALIASES.get(str(k), k): v for k, v in item.items() if not (k in ALIASES and ALIASES[k] in item)}
    errors, warnings = [], []
    unknown = sorted((str(k) for k in item if k not in FIELDS))  # YAML keys may be numbers
    if unknown:
        warnings.append(f"unknown field(s) {', '.join(unknown)} ignored (known: {', '.join(sorted(FIELDS))})")
    fields: dict[str, Any] = {}
    for name in ("id", "task"):
        if not isinstance(item.get(name), str) or not item[name].strip():
            errors.append(f"`{name}` is required and must be a non-empty string")
    tool = item.get("tool") is not None  # a tool may be a task type of its own (catalog/tools.py)
    task = item.get("task")
    if isinstance(task, str) and task and task not in TASKS and not tool:
        errors.append(f"unknown task {task!r}")
    elif isinstance(task, str) and task not in TASKS and not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", task):
        # plans spell task names so (plan.py): another spelling would be a type no plan can name
        errors.append(f"a tool's own task type is lowercase words joined by '-', got {task!r}")
    for name, value in item.items():
        if name not in FIELDS or value is None:
            continue
        if name in INT_FIELDS:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                errors.append(f"`{name}` must be a whole number >= 0, got {value!r}")
                continue
        elif name in STR_FIELDS:
            if not isinstance(value, str):
                errors.append(f"`{name}` must be a string, got {value!r}")
                continue
            value = value.strip()
        elif name in BOOL_FIELDS:
            if not isinstance(value, bool):
                errors.append(f"`{name}` must be true or false, got {value!r}")
                continue
        elif name in LIST_FIELDS:
            value = [value] if isinstance(value, str) else value
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                errors.append(f"`{name}` must be a list of strings")
                continue
            value = tuple(value)
        elif name == "tool":
            value, problem = parse_tool(value)
            if problem:
                errors.append(problem)
                continue
        elif name == "providers":
            value, problem = _providers(value)
            if problem:
                errors.append(problem)
                continue
        fields[name] = value
    if "id" in fields and not tool and not {"path", "endpoint_url"} & set(fields):
        problem = hub_id_problem(fields["id"])  # the id alone is what gets loaded or called
        if problem is not None:
            errors.append(
                f"`id` {fields['id']!r} is not a Hugging Face model id (owner/name): {problem}; "
                "a model that is not on the Hub needs `path:` or `endpoint_url:`"
            )
    if "endpoint_url" in fields:
        url = urlparse(fields["endpoint_url"])
        if url.scheme not in ("http", "https") or not url.netloc:
            errors.append(f"`endpoint_url` must be an http(s) URL, got {fields['endpoint_url']!r}")
    if "path" in fields:
        try:
            folder = Path(fields["path"]).expanduser()
            folder = (folder if folder.is_absolute() else base / folder).resolve()
        except (OSError, RuntimeError, ValueError) as err:  # ~unknown-user, NUL byte, symlink loop
            errors.append(f"`path` {fields['path']!r} is not a usable folder path ({err})")
        else:
            if not folder.is_dir():
                errors.append(f"`path` {fields['path']!r} is not a folder (resolved to {folder})")
            fields["path"] = str(folder)
    return fields, errors, warnings


def _providers(value: Any) -> tuple[tuple[ProviderRoute, ...], str | None]:
    """`providers`: a list of {provider, status, task}, each a non-empty string, and optionally
    price_usd (one call's price, a number not below 0)."""
    wrong = "`providers` must be a list of {provider, status, task} entries (strings; price_usd: a number)"
    if not isinstance(value, list):
        return (), wrong
    routes = []
    for item in value:
        if not isinstance(item, dict) or not set(ROUTE_FIELDS) <= set(item) <= {*ROUTE_FIELDS, "price_usd"}:
            return (), wrong
        if not all(isinstance(item[k], str) and item[k].strip() for k in ROUTE_FIELDS):
            return (), wrong
        price = item.get("price_usd")
        if price is not None and (isinstance(price, bool) or not isinstance(price, int | float) or price < 0):
            return (), wrong
        route = ProviderRoute(**{k: item[k].strip() for k in ROUTE_FIELDS})
        routes.append(replace(route, price_usd=float(price)) if price is not None else route)
    return tuple(routes), None
