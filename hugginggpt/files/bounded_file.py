"""One reader for the JSON and YAML files a person can be handed: plan files, traces, user catalogs,
the config file. Bounded before anything is built from the data: its size, its nesting depth, and
mapping keys that are strings. A file over a bound is a FileRefused (a ValueError) whose message
says which bound and where; never a RecursionError or a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_BYTES = 20_000_000  # a trace holds text outputs up to the trace limits: far below this
MAX_DEPTH = 64  # plans, traces, catalog entries and settings nest a few levels


class FileRefused(ValueError):
    """A file that cannot be used; the message names the file and says why."""


def read_text(path: Path, *, max_bytes: int = MAX_BYTES) -> str:
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise FileRefused(f"{path} is {size:,} bytes, over the limit of {max_bytes:,}")
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise FileRefused(f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise FileRefused(f"{path} is not UTF-8 text (byte {e.start})") from None


def parse_json(text: str, where: str, *, max_depth: int = MAX_DEPTH, not_json: str = "") -> Any:
    """JSON text, bounded; `where` names it in errors ("mine.jsonl:12"), `not_json` says what is
    wrong when the text is no JSON at all (default: "<where>: not valid JSON (why)")."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise FileRefused(f"{where}: nested more than {max_depth} levels deep") from None
    except ValueError as e:
        raise FileRefused(f"{not_json or f'{where}: not valid JSON'} ({e})") from None
    check_shape(value, where, max_depth=max_depth)
    return value


def read_json(path: Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    text = read_text(path, max_bytes=max_bytes)
    return parse_json(text, str(path), max_depth=max_depth, not_json=f"{path} is not a JSON file")


def read_yaml(path: Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    import yaml

    text = read_text(path, max_bytes=max_bytes)
    try:
        value = yaml.safe_load(text)
    except RecursionError:
        raise FileRefused(f"{path}: nested more than {max_depth} levels deep") from None
    except yaml.YAMLError as e:
        raise FileRefused(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    check_shape(value, str(path), max_depth=max_depth)
    return value


def check_shape(value: Any, where: str, *, max_depth: int = MAX_DEPTH, string_keys: bool = True) -> None:
    """FileRefused unless `value` nests at most `max_depth` levels and (with `string_keys`) every
    mapping key is a string (YAML allows numbers and more). Walked without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            bad = next((k for k in item if not isinstance(k, str)), None) if string_keys else None
            if bad is not None:
                raise FileRefused(f"{where}: every key must be a string, not {str(bad)[:40]!r}")
            children = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        if children and depth >= max_depth:
            raise FileRefused(f"{where}: nested more than {max_depth} levels deep")
        stack.extend((child, depth + 1) for child in children)
