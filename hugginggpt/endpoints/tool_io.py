"""What Space and MCP tool endpoints share: task inputs turned into the tool's arguments (checked
against its input schema), and whatever the tool returns turned into typed artifacts in the workspace.

Media never pass through the LLM: a file argument is a workspace Path here, sent as the tool takes
it; files that come back are written under the task's folder. A file the tool serves from its own
address is fetched from there (127.0.0.1 included: the operator added that server); a link to any
other address is fetched only under urlguard's rules, so a tool cannot point the app at a private one.
"""

from __future__ import annotations

import base64
import json
import mimetypes
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hugginggpt.catalog import ModelCard
from hugginggpt.catalog.tools import ToolRef
from hugginggpt.endpoints.base import Endpoint, EndpointError, Footprint, ModelUnavailable
from hugginggpt.files.artifacts import Artifact, ArtifactKind, kind_of_file
from hugginggpt.files.urlguard import URLRefused, fetch, is_public

MAX_OUTPUT_BYTES = 50 * 1024 * 1024  # all a call may bring back: files and text together
MAX_INPUT_FILE_BYTES = 20 * 1024 * 1024  # a file sent inline (data URL, base64)
_CONVERT: dict[str, Callable[[str], Any]] = {
    "number": float,
    "integer": int,
    "boolean": lambda s: _boolean(s),
}


class ToolEndpoint(Endpoint):
    """An endpoint for the catalog's tools of one `kind` ("space", "mcp"): it runs what was added
    as such a tool, elsewhere (nothing on this machine)."""

    kind: str = ""
    what: str = ""  # what a tool of this kind is, for the refusal of another card

    def __init__(self, *, hf_token: str | None = None, timeout: float = 120.0) -> None:
        self.hf_token, self.timeout = hf_token, timeout

    def can_run(self, model: ModelCard) -> bool:
        return model.tool is not None and model.tool.kind == self.kind

    def footprint(self, model: ModelCard) -> Footprint:
        return Footprint("hosted", size_bytes=None)

    def tool(self, model: ModelCard) -> ToolRef:
        """The card's tool of this kind; another card is refused."""
        if model.tool is None or model.tool.kind != self.kind:
            raise ModelUnavailable(f"{model.id} is not {self.what}")
        return model.tool


def _boolean(text: str) -> bool:
    if text.strip().lower() in ("true", "yes", "1"):
        return True
    if text.strip().lower() in ("false", "no", "0"):
        return False
    raise ValueError(f"{text!r} is not true or false")


def tool_arguments(
    ref: ToolRef, inputs: dict[str, Any], send_file: Callable[[Path, str], Any]
) -> dict[str, Any]:
    """The tool's arguments from a task's inputs: each task argument under the parameter it maps to
    (inputs the tool has no parameter for, like a seed, are left out), text converted to the type
    the schema names, files through `send_file(path, kind)`; then checked against the schema."""
    import jsonschema  # type: ignore[import-untyped]

    schema = ref.schema
    props = schema.get("properties") or {}
    media = dict(ref.media)
    arguments: dict[str, Any] = {}
    for name, value in inputs.items():
        param = ref.param(name)
        if param not in props:
            continue
        if isinstance(value, Path):
            arguments[param] = send_file(value, media.get(param, kind_of_file(value) or "image"))
            continue
        wanted = (props[param] or {}).get("type")
        try:
            arguments[param] = (
                _CONVERT[wanted](str(value)) if wanted in _CONVERT else _structured(wanted, value)
            )
        except (ValueError, TypeError) as e:
            raise EndpointError(f"argument '{name}' is not a {wanted}: {e}") from None
    checked = {
        **schema,
        "properties": {p: ({"type": "string"} if p in media else v) for p, v in props.items()},
    }
    try:
        jsonschema.validate({p: (v if p not in media else "file") for p, v in arguments.items()}, checked)
    except jsonschema.ValidationError as e:
        raise EndpointError(f"the arguments do not fit the tool's input schema: {e.message[:300]}") from None
    except jsonschema.SchemaError as e:
        raise EndpointError(f"the tool's input schema is not valid: {e.message[:200]}") from None
    return arguments


def _structured(wanted: Any, value: Any) -> Any:
    """Objects and arrays arrive as JSON text; anything else stays the text it is."""
    if wanted in ("object", "array") and isinstance(value, str):
        return json.loads(value)
    return value


def inline_file(path: Path, encoding: str) -> str:
    """A file as a data URL or plain base64, as an MCP tool's schema asks for it."""
    size = path.stat().st_size
    if size > MAX_INPUT_FILE_BYTES:
        raise EndpointError(
            f"{path.name} is {size // 1_000_000} MB, over the {MAX_INPUT_FILE_BYTES // 1_000_000} MB "
            "a tool is sent"
        )
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    if encoding == "base64":
        return data
    return f"data:{mimetypes.guess_type(path.name)[0] or 'application/octet-stream'};base64,{data}"


class Outputs:
    """Collects what one call returns as artifacts, within one byte budget for the whole call."""

    def __init__(self, ref: ToolRef, out_dir: Path, budget: int = MAX_OUTPUT_BYTES) -> None:
        self.ref, self.out_dir, self.left = ref, out_dir, budget
        self.artifacts: list[Artifact] = []

    def _spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise EndpointError(f"the tool {self.ref.name} sent more than {MAX_OUTPUT_BYTES // 1_000_000} MB")

    def text(self, value: str) -> None:
        self._spend(len(value.encode()))
        self.artifacts.append(Artifact(ArtifactKind.TEXT, value=value))

    def data(self, value: Any) -> None:
        self._spend(len(json.dumps(value, default=str)))
        self.artifacts.append(Artifact(ArtifactKind.DATA, value=value))

    def blob(self, data: bytes, mime: str | None, kind: str | None = None) -> None:
        """A file sent inline (MCP image, audio, embedded resource)."""
        self._spend(len(data))
        suffix = mimetypes.guess_extension(mime or "") or ".bin"
        kind = kind or kind_of_file("x" + suffix)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = _unused(self.out_dir / f"{self.ref.name[:40] or 'tool'}-{len(self.artifacts) + 1}{suffix}")
        path.write_bytes(data)
        self.artifacts.append(
            Artifact(ArtifactKind(kind), path=path)
            if kind
            else Artifact(ArtifactKind.DATA, value={"file": path.name})
        )

    def link(self, url: str, kind: str | None = None, *, headers: dict[str, str] | None = None) -> None:
        """A file the tool names by URL: from its own address directly, from anywhere else only
        where urlguard allows (never a private or loopback address)."""
        own = _origin(url) == self.ref.origin
        try:
            path = fetch(
                url,
                self.out_dir,
                max_bytes=max(self.left, 0),
                max_redirects=0 if own else 5,
                allowed=(lambda _address: True) if own else is_public,
            )
        except URLRefused as e:
            raise EndpointError(
                f"the tool {self.ref.name} returned a link that is not fetched: {e}"
            ) from None
        self._spend(path.stat().st_size)
        kind = kind or kind_of_file(path) or kind_of_file(urlsplit(url).path)
        self.artifacts.append(
            Artifact(ArtifactKind(kind), path=path)
            if kind
            else Artifact(ArtifactKind.DATA, value={"file": path.name})
        )


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    return (
        parts.scheme,
        (parts.hostname or "").lower(),
        parts.port or (443 if parts.scheme == "https" else 80),
    )


def _unused(path: Path) -> Path:
    n = 1
    while path.exists():
        n += 1
        path = path.with_name(f"{path.stem}-{n}{path.suffix}")
    return path
