"""Tools as catalog entries: a Gradio Space's endpoint or an MCP server's tool (`tool:` in an entry).

A tool either serves an existing task type (its inputs and outputs fit one: then it is one more
candidate for it) or is a task type of its own, named after it. What a tool says about itself (name,
description, schema) comes from someone else: it is pinned by a hash when the operator adds it, and
reaches the planning prompt only quoted and capped (`task_spec`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from hugginggpt.files.hashing import value_sha256
from hugginggpt.tasks import Arg, TaskSpec

KINDS = ("space", "mcp")
MEDIA = ("image", "audio", "video")
OUTPUT_KINDS = ("text", "image", "audio", "video", "data")
DESCRIPTION_CHARS = 300  # of a tool's own description, in the planning prompt
HELP_CHARS = 80  # of each argument's description there
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

# Which existing task type a tool serves, by (its required input kinds, its first output kind).
FITS: dict[tuple[tuple[str, ...], str], str] = {
    (("text",), "image"): "text-to-image",
    (("image",), "image"): "image-to-image",
    (("text",), "audio"): "text-to-speech",
    (("image",), "text"): "image-to-text",
    (("audio",), "text"): "automatic-speech-recognition",
    (("audio",), "audio"): "audio-to-audio",
    (("text",), "video"): "text-to-video",
}


@dataclass(frozen=True)
class ToolRef:
    """Where a tool is and what it said it was when it was added."""

    kind: str  # "space" (gradio_client) | "mcp" (the mcp package)
    name: str  # the Space's api_name (without "/") or the MCP tool's name
    server: str  # a short name for people: owner/name, host:port, or the command's name
    url: str | None = None  # the Space's root, or the MCP server's streamable HTTP address
    command: tuple[str, ...] = ()  # a local MCP server over stdio
    description: str = ""  # the tool's own words (untrusted data)
    inputs: str = "{}"  # its input JSON schema, as canonical JSON text (keeps the card hashable)
    output_schema: str = "null"  # what it says it returns (MCP outputSchema, a Space's returns), JSON
    outputs: tuple[str, ...] = ("text",)  # the kinds it returns, in its order (the operator may edit)
    media: tuple[tuple[str, str], ...] = ()  # parameter -> image | audio | video: sent as a file
    encoding: str = "data-url"  # how an MCP tool takes a file: data-url | base64
    args: tuple[tuple[str, str], ...] = ()  # task argument -> tool parameter, serving a task type
    headers: tuple[tuple[str, str], ...] = ()  # sent to the server; ${VAR} from the environment
    hash: str = ""

    @property
    def schema(self) -> dict[str, Any]:
        return json.loads(self.inputs)

    @property
    def returns(self) -> Any:
        return json.loads(self.output_schema)

    @property
    def origin(self) -> tuple[str, str, int] | None:
        """(scheme, host, port) of the tool's own address, where its served files come from."""
        if not self.url:
            return None
        parts = urlsplit(self.url)
        return (
            parts.scheme,
            (parts.hostname or "").lower(),
            parts.port or (443 if parts.scheme == "https" else 80),
        )

    def param(self, arg: str) -> str:
        """The tool parameter a task argument goes to."""
        return dict(self.args).get(arg, arg)

    def to_json(self) -> dict[str, Any]:
        raw: dict[str, Any] = {"kind": self.kind, "name": self.name, "server": self.server}
        raw |= {"url": self.url} if self.url else {"command": list(self.command)}
        raw |= {"description": self.description, "inputs": self.schema, "output_schema": self.returns}
        raw["outputs"] = list(self.outputs)
        if self.media:
            raw["media"] = dict(self.media)
            raw["encoding"] = self.encoding
        if self.args:
            raw["args"] = dict(self.args)
        if self.headers:
            raw["headers"] = dict(self.headers)
        raw["hash"] = self.hash
        return raw


def fingerprint(name: str, description: str, inputs: dict[str, Any], returns: Any) -> str:
    """What a tool claims to be (name, description, input and output schema), as one hash."""
    return "sha256:" + value_sha256(
        {"name": name, "description": description, "inputs": inputs, "returns": returns}
    )


def changes(ref: ToolRef, description: str, inputs: dict[str, Any], returns: Any) -> list[str]:
    """What the live tool changed against its entry, in words ([] when it still matches the hash)."""
    if fingerprint(ref.name, description, inputs, returns) == ref.hash:
        return []
    found = [
        what
        for what, same in (
            ("description", description == ref.description),
            ("input schema", inputs == ref.schema),
            ("output schema", returns == ref.returns),
        )
        if not same
    ]
    return found or ["the entry itself (its hash does not match what it records)"]


def headers_of(ref: ToolRef, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The entry's headers with ${VAR} filled from the environment; KeyError names a missing one."""
    env = os.environ if environ is None else environ

    def fill(match: re.Match[str]) -> str:
        if match.group(1) not in env:
            raise KeyError(f"the environment variable {match.group(1)} (for the tool's headers) is not set")
        return env[match.group(1)]

    return {name: _VAR.sub(fill, value) for name, value in ref.headers}


def parse_tool(raw: Any) -> tuple[ToolRef | None, str | None]:
    """A `tool:` mapping as add-space / add-mcp write it; (None, problem) when it is not one."""
    if not isinstance(raw, dict):
        return None, "`tool` must be a mapping (kind, name, server, url or command, inputs, hash, ...)"
    kind, name, url, command = raw.get("kind"), raw.get("name"), raw.get("url"), raw.get("command")
    if kind not in KINDS:
        return None, f"`tool.kind` must be one of {', '.join(KINDS)}, got {kind!r}"
    if not isinstance(name, str) or not name.strip():
        return None, "`tool.name` must be a non-empty string"
    if url is not None:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            return None, f"`tool.url` must be an http(s) URL, got {url!r}"
    elif kind == "space" or not _strings(command) or not command:
        return (
            None,
            "a tool needs `url:` (a Space or an MCP server) or, for a local MCP server, `command:` (a list)",
        )
    inputs, outputs = raw.get("inputs", {}), raw.get("outputs", ["text"])
    if not isinstance(inputs, dict):
        return None, "`tool.inputs` must be a JSON schema (a mapping)"
    if not _strings(outputs) or not outputs or any(o not in OUTPUT_KINDS for o in outputs):
        return None, f"`tool.outputs` must be a list of kinds ({', '.join(OUTPUT_KINDS)})"
    maps = {}
    for field in ("media", "args", "headers"):
        value = raw.get(field, {})
        if not isinstance(value, dict) or not _strings(list(value)) or not _strings(list(value.values())):
            return None, f"`tool.{field}` must map strings to strings"
        maps[field] = tuple(value.items())
    if any(kind not in MEDIA for _, kind in maps["media"]):
        return None, f"`tool.media` values must be one of {', '.join(MEDIA)}"
    encoding = raw.get("encoding", "data-url")
    if encoding not in ("data-url", "base64"):
        return None, "`tool.encoding` must be data-url or base64"
    if not isinstance(raw.get("hash"), str) or not raw["hash"].startswith("sha256:"):
        return (
            None,
            "`tool.hash` is missing: add the tool with `python -m hugginggpt.catalog add-space|add-mcp`",
        )
    description = raw.get("description", "")
    if not isinstance(description, str):
        return None, "`tool.description` must be a string"
    ref = ToolRef(
        kind=kind,
        name=name.strip(),
        server=str(raw.get("server") or url or (command or ["server"])[0]),
        url=url,
        command=tuple(command or ()),
        description=description,
        inputs=json.dumps(inputs),  # in its order: the arguments are listed so
        output_schema=json.dumps(raw.get("output_schema"), sort_keys=True),
        outputs=tuple(outputs),
        media=maps["media"],
        encoding=encoding,
        args=maps["args"],
        headers=maps["headers"],
        hash=raw["hash"],
    )
    return ref, None


def _strings(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)


def task_spec(task: str, ref: ToolRef) -> TaskSpec:
    """The task type a tool of its own kind is: its arguments from its schema, its words quoted."""
    schema = ref.schema
    required = set(schema.get("required", ()))
    media = dict(ref.media)
    args = []
    properties = (schema.get("properties") or {}).items()
    for name, prop in sorted(properties, key=lambda item: item[0] not in required):  # required first
        prop = prop if isinstance(prop, dict) else {}
        kind = media.get(name, "text")
        said = str(prop.get("description") or "")[:HELP_CHARS]
        shape = prop.get("type") if kind == "text" and isinstance(prop.get("type"), str) else ""
        hint = ", ".join(
            p for p in (shape, "default " + json.dumps(prop["default"]) if "default" in prop else "") if p
        )
        args.append(Arg(name, kind, required=name in required, help=_quoted(hint, said)))
    words = json.dumps(ref.description[:DESCRIPTION_CHARS], ensure_ascii=False)
    description = (
        f"the tool {json.dumps(ref.name)} of {ref.server}; it describes itself (quoted data) as {words}"
    )
    return TaskSpec(task, tuple(args), ref.outputs, description)


def _quoted(hint: str, said: str) -> str:
    return "; ".join(
        p for p in (hint, f"described as {json.dumps(said, ensure_ascii=False)}" if said else "") if p
    )


def fit(ref: ToolRef) -> tuple[str, dict[str, str]] | None:
    """The existing task type the tool serves and how task arguments map to its parameters."""
    schema = ref.schema
    required = [n for n in (schema.get("properties") or {}) if n in set(schema.get("required", ()))]
    media = dict(ref.media)
    kinds = tuple(media.get(n, "text") for n in required)
    task = FITS.get((kinds, ref.outputs[0]))
    if task is None:
        return None
    return task, {kind: name for kind, name in zip(kinds, required, strict=True)}
