"""TaskBench-format data: the tool list, the user requests and the gold plans.

Two gold layouts are read:
- 2023 (`data.json` as the upstream evaluate.py reads it): `task_nodes` and `task_links` are
  lists, the request is `user_request`, the steps `task_steps`.
- 2024 (the Hub's parquet/JSON export): `tool_nodes`, `tool_links` and `tool_steps` are JSON
  strings (lists are accepted too), the request is `instruction`.
A node is `{"task": <tool name>, "arguments": [...]}`; an argument is a literal or "<node-k>", the
output of the k-th node of the same list.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SHAPES = ("single", "chain", "dag")
GOLD_NAMES = ("data.json", "data.jsonl", "data.parquet", "improved.parquet")
REQUEST_NAMES = ("user_requests.json", "user_requests.jsonl")
_NOT_GOLD = {"tool_desc.json", "graph_desc.json", "alignment_ids.json", *REQUEST_NAMES}
NODE_REF = re.compile(r"<node-(\d+)>")


class DataError(ValueError):
    """The data folder or a file in it is not in TaskBench format."""


@dataclass(frozen=True)
class Tool:
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    description: str = ""

    @property
    def output_type(self) -> str:
        """What upstream names an argument that takes this tool's output: its first output type."""
        return self.outputs[0] if self.outputs else "none"


@dataclass
class GoldSample:
    id: str
    request: str
    shape: str  # single | chain | dag: how TaskBench sampled the tool graph
    nodes: list[dict[str, Any]]  # [{"task": str, "arguments": [str, ...]}]
    links: list[tuple[str, str]] = field(default_factory=list)  # task_links, by tool name
    steps: list[str] = field(default_factory=list)
    layout: str = "2023"

    @property
    def n_tools(self) -> int:
        # As upstream groups samples: by the number of gold nodes, not the sampled n_tools.
        return len(self.nodes)


@dataclass
class Dataset:
    tools: dict[str, Tool]
    samples: list[GoldSample]
    gold_path: Path
    requests_path: Path | None = None


def load_dataset(folder: str | Path, *, gold: str | Path | None = None) -> Dataset:
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"{folder} is not a folder")
    tools = load_tools(folder / "tool_desc.json")
    gold_path = Path(gold) if gold else find_gold(folder)
    samples = load_gold(gold_path)
    requests_path = next((folder / n for n in REQUEST_NAMES if (folder / n).is_file()), None)
    if requests_path is not None:
        # The requests file holds what upstream's inference sends; prefer it to the gold copy.
        texts = load_requests(requests_path)
        for sample in samples:
            sample.request = texts.get(sample.id, sample.request)
    missing = [s.id for s in samples if not s.request]
    if missing:
        raise DataError(f"no request text for ids {', '.join(missing[:5])} in {gold_path}")
    return Dataset(tools=tools, samples=samples, gold_path=gold_path, requests_path=requests_path)


def load_tools(path: Path) -> dict[str, Tool]:
    if not path.is_file():
        raise DataError(f"{path} is missing: the tool list is needed to score tool names and arguments")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:  # not JSON, or not UTF-8
        raise DataError(f"{path}: not a JSON tool list ({e})") from None
    nodes = raw.get("nodes") if isinstance(raw, dict) else raw
    if not isinstance(nodes, list) or not nodes:
        raise DataError(f"{path} has no list of tool nodes")
    tools = {}
    for index, node in enumerate(nodes):
        try:
            name = str(node["id"])
            tools[name] = Tool(
                name=name,
                inputs=tuple(node.get("input-type", ())),
                outputs=tuple(node.get("output-type", ())),
                description=str(node.get("desc", "")),
            )
        except (KeyError, TypeError, AttributeError) as e:
            raise DataError(f"{path}, tool {index + 1}: not a TaskBench tool node ({e!r})") from None
    return tools


def find_gold(folder: Path) -> Path:
    for name in GOLD_NAMES:
        if (folder / name).is_file():
            return folder / name
    for path in sorted([*folder.glob("*.jsonl"), *folder.glob("*.json")]):
        if path.name in _NOT_GOLD:
            continue
        first = next(iter(read_records(path, limit=1)), None)
        if isinstance(first, dict) and ("task_nodes" in first or "tool_nodes" in first):
            return path
    raise DataError(
        f"no gold file in {folder} (looked for {', '.join(GOLD_NAMES)} and *.jsonl with task_nodes)"
    )


def load_gold(path: Path) -> list[GoldSample]:
    samples, seen = [], set()
    for index, record in enumerate(read_records(path)):
        try:
            sample = parse_gold(record)
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"{path}, record {index + 1}: not a TaskBench gold record ({e})") from None
        if sample.id not in seen:  # upstream keeps one record per id
            seen.add(sample.id)
            samples.append(sample)
    if not samples:
        raise DataError(f"{path} holds no gold records")
    return samples


def parse_gold(record: dict[str, Any]) -> GoldSample:
    if "task_nodes" in record:
        layout, nodes, links, steps = (
            "2023",
            record["task_nodes"],
            record.get("task_links"),
            record.get("task_steps"),
        )
        request = record.get("user_request", "")
    elif "tool_nodes" in record:
        layout = "2024"
        nodes, links, steps = (_maybe_json(record.get(k)) for k in ("tool_nodes", "tool_links", "tool_steps"))
        request = record.get("instruction") or record.get("user_request", "")
    else:
        raise KeyError("task_nodes or tool_nodes")
    if not isinstance(nodes, list):
        raise TypeError("the nodes are not a list")
    clean_nodes = [
        {"task": str(n["task"]), "arguments": [argument_text(a) for a in _as_list(n.get("arguments"))]}
        for n in nodes
    ]
    clean_links = [(str(link["source"]), str(link["target"])) for link in _as_list(links)]
    shape = str(record.get("type") or infer_shape(clean_nodes))
    return GoldSample(
        id=str(record["id"]),
        request=str(request or ""),
        shape=shape,
        nodes=clean_nodes,
        links=clean_links,
        steps=[str(s) for s in _as_list(steps)],
        layout=layout,
    )


def argument_text(argument: Any) -> str:
    """One argument as a string. Dicts ({"name", "value"}) give their value; lists are joined."""
    if isinstance(argument, dict):
        value = argument["value"] if "value" in argument else next(iter(argument.values()), "")
        return argument_text(value)
    if isinstance(argument, list):
        return " ".join(argument_text(a) for a in argument)
    return argument if isinstance(argument, str) else json.dumps(argument)


def node_references(nodes: list[dict[str, Any]]) -> list[list[int]]:
    """For each node, the indexes of the nodes whose outputs its arguments use (no self-loops)."""
    refs = []
    for index, node in enumerate(nodes):
        found = []
        for argument in node["arguments"]:
            match = NODE_REF.search(argument)
            if match and int(match.group(1)) != index and int(match.group(1)) < len(nodes):
                found.append(int(match.group(1)))
        refs.append(found)
    return refs


def infer_shape(nodes: list[dict[str, Any]]) -> str:
    """single | chain | dag from the <node-k> references, for records that do not say."""
    if len(nodes) <= 1:
        return "single"
    refs = node_references(nodes)
    edges = {(src, dst) for dst, sources in enumerate(refs) for src in sources}
    outs = [sum(1 for s, _ in edges if s == i) for i in range(len(nodes))]
    ins = [sum(1 for _, d in edges if d == i) for i in range(len(nodes))]
    is_path = len(edges) == len(nodes) - 1 and max(outs) <= 1 and max(ins) <= 1
    return "chain" if is_path else "dag"


def load_requests(path: Path) -> dict[str, str]:
    return {
        str(r["id"]): str(r.get("user_request") or r.get("instruction") or "") for r in read_records(path)
    }


def read_records(path: Path, *, limit: int | None = None) -> list[dict[str, Any]]:
    """Records from JSON Lines, a JSON list, or parquet (which needs pandas and pyarrow)."""
    if path.suffix == ".parquet":
        try:
            import pandas
        except ImportError as e:
            raise DataError(f"reading {path} needs pandas and pyarrow: pip install pandas pyarrow") from e
        try:
            frame = pandas.read_parquet(path)
        except ImportError as e:
            raise DataError(f"reading {path} needs pyarrow: pip install pyarrow") from e
        return frame.head(limit).to_dict("records") if limit else frame.to_dict("records")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e})") from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            records = json.loads(text)  # not `stripped`: error line numbers are the file's
        except json.JSONDecodeError as e:
            raise DataError(f"{path}, line {e.lineno}: not JSON ({e.msg})") from None
        return records[:limit] if limit else records
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise DataError(f"{path}, line {number}: not JSON ({e.msg})") from None
        if limit and len(records) >= limit:
            break
    return records


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        return json.loads(value) if value.strip() else []
    return value


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)
