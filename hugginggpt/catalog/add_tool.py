"""`add-space` and `add-mcp`: read a Gradio app's API description or an MCP server's tool list and
write catalog entries the operator reviews (catalog/tools.py says what an entry holds).

Headers given as NAME=VALUE are written as given: write `${VAR}` and set VAR in the environment, so
no secret lands in the file; the values are expanded (from the environment) to ask the server.
"""

from __future__ import annotations

import json
import re
import shlex
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hugginggpt.catalog.tools import _VAR, MEDIA, ToolRef, fingerprint, fit
from hugginggpt.tasks import BUILT_IN

CARD_DESCRIPTION_CHARS = 200


def server_name(target: str) -> str:
    """A short name: the Space id, host:port of a URL, or the stem of a command's last word."""
    if target.startswith(("http://", "https://")):
        return urlsplit(target).netloc
    if re.fullmatch(r"[\w.-]+/[\w.-]+", target):
        return target
    words = shlex.split(target)  # the script a command runs names it better than its interpreter
    script = next((w for w in words[1:] if Path(w).suffix in (".py", ".js", ".mjs", ".ts")), words[0])
    return Path(script).stem or "server"


def slug(text: str) -> str:
    """A task type name as plans spell them (plan.py turns "_" and spaces into "-")."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "tool"


def entry(ref: ToolRef, *, own_task: bool, taken: set[str], license: str | None) -> dict[str, Any]:
    """A catalog entry for `ref`: serving the task type it fits, or a task type named after it."""
    fitted = None if own_task else fit(ref)
    if fitted:
        task, args = fitted
        ref = replace(ref, args=tuple(args.items()))
    else:
        task = slug(ref.name)
        if task in BUILT_IN or task in taken:
            task = f"{slug(ref.server)}-{task}"
    said = json.dumps(ref.description[:CARD_DESCRIPTION_CHARS], ensure_ascii=False)
    raw: dict[str, Any] = {
        "id": f"{ref.kind}:{ref.server}/{ref.name}",
        "task": task,
        "description": f"{ref.kind} tool {ref.name} of {ref.server}, described by it (quoted) as {said}",
        "tool": ref.to_json(),
    }
    if license:
        raw["license"] = license
    return raw


def _parse_headers(pairs: list[str]) -> tuple[tuple[str, str], ...]:
    found = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--header wants NAME=VALUE, got {pair!r}")
        if not _VAR.search(value):  # a secret written into the catalog file would travel with it
            raise ValueError(
                f"--header {name.strip()}: write the value as ${{VAR}} and set VAR in the environment"
            )
        found.append((name.strip(), value))
    return tuple(found)


def space_refs(target: str, apis: list[str], header_pairs: list[str], hf_token: str | None) -> list[ToolRef]:
    """One ToolRef per named endpoint of the Gradio app (all, or those `apis` names)."""
    from hugginggpt.endpoints.mcp_tool import credentials
    from hugginggpt.endpoints.space import client_for, describe_endpoint

    url = target if target.startswith(("http://", "https://")) else None
    probe = ToolRef(
        "space",
        "-",
        server_name(target),
        url=url or "https://huggingface.co",
        headers=_parse_headers(header_pairs),
    )
    if url is None:  # a Space id: gradio_client finds its address (asks the Hub)
        from gradio_client import Client  # type: ignore[import-untyped]

        url = Client(target, verbose=False, download_files=False).src
    probe = replace(probe, url=url)
    client = client_for(probe, hf_token, credentials(probe, None))
    named = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    wanted = ["/" + a.lstrip("/") for a in apis] or list(named)
    missing = [a for a in wanted if a not in named]
    if missing:
        raise LookupError(f"the app has no endpoint {', '.join(missing)} (it has {', '.join(named)})")
    refs = []
    for api in wanted:
        description, schema, returns, media, outputs = describe_endpoint(named[api])
        name = api.lstrip("/")
        refs.append(
            replace(
                probe,
                name=name,
                description=description,
                inputs=json.dumps(schema),
                output_schema=json.dumps(returns, sort_keys=True),
                outputs=tuple(outputs),
                media=tuple(media.items()),
                hash=fingerprint(name, description, schema, returns),
            )
        )
    return refs


def mcp_refs(target: str, tools: list[str], header_pairs: list[str], hf_token: str | None) -> list[ToolRef]:
    """One ToolRef per tool the MCP server lists (all, or those `tools` names)."""
    from hugginggpt.endpoints import mcp_loop
    from hugginggpt.endpoints.mcp_tool import credentials, open_session

    is_url = target.startswith(("http://", "https://"))
    probe = ToolRef(
        "mcp",
        "-",
        server_name(target),
        url=target if is_url else None,
        command=() if is_url else tuple(shlex.split(target)),
        headers=_parse_headers(header_pairs),
    )
    headers = credentials(probe, hf_token)

    async def listing() -> Any:
        async with open_session(probe, headers) as session:
            return (await session.list_tools()).tools

    listed = {t.name: t for t in mcp_loop.call(listing, timeout=60.0, what=f"listing the tools of {target}")}
    missing = [t for t in tools if t not in listed]
    if missing:
        raise LookupError(f"the server has no tool {', '.join(missing)} (it has {', '.join(listed)})")
    gradio = _gradio_outputs(target, headers) if is_url else {}
    refs = []
    for name in tools or list(listed):
        tool = listed[name]
        props = tool.inputSchema.get("properties") or {}
        media = {p: kind for p, prop in props.items() if (kind := _media_kind(prop))}
        base64 = any(isinstance(p, dict) and p.get("contentEncoding") == "base64" for p in props.values())
        refs.append(
            replace(
                probe,
                name=name,
                description=tool.description or "",
                inputs=json.dumps(tool.inputSchema),
                output_schema=json.dumps(tool.outputSchema, sort_keys=True),
                outputs=tuple(gradio.get(name) or (["text", "data"] if tool.outputSchema else ["text"])),
                media=tuple(media.items()),
                encoding="base64" if base64 else "data-url",
                hash=fingerprint(name, tool.description or "", tool.inputSchema, tool.outputSchema),
            )
        )
    return refs


def _media_kind(prop: Any) -> str | None:
    """image | audio | video for a parameter that takes a file, as its schema says (a Gradio File
    Input's format, a contentMediaType, base64 content, a description asking for a data URL or
    base64); None for any other."""
    if not isinstance(prop, dict):
        return None
    said = str(prop.get("description", "")).lower()
    is_file = (
        "file" in str(prop.get("format", "")).lower()
        or "contentMediaType" in prop
        or prop.get("contentEncoding") == "base64"
        or "data url" in said
        or "base64" in said
    )
    words = " ".join(
        str(prop.get(k, "")) for k in ("title", "description", "contentMediaType", "format")
    ).lower()
    return next((kind for kind in MEDIA if kind in words), None) if is_file else None


def _gradio_outputs(url: str, headers: dict[str, str]) -> dict[str, list[str]]:
    """A Gradio app's MCP server says nothing of its outputs; its API description does."""
    from hugginggpt.endpoints.space import describe_endpoint

    base, sep, _ = url.partition("/gradio_api/mcp")
    if not sep:
        return {}
    try:
        request = urllib.request.Request(f"{base}/gradio_api/info", headers=headers)
        with urllib.request.urlopen(request, timeout=20) as reply:
            named = json.loads(reply.read(5_000_000)).get("named_endpoints", {})
    except (OSError, ValueError):
        return {}
    return {
        api.lstrip("/"): describe_endpoint(info)[4] for api, info in named.items() if isinstance(info, dict)
    }


def write_entries(entries: list[dict[str, Any]], out: Path) -> int:
    """Add `entries` to the user file `out` (YAML by its suffix, else JSONL), replacing any with the
    same id; the file's other entries stay."""
    ids = {e["id"] for e in entries}
    kept = [e for e in read_raw(out) if e.get("id") not in ids]
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() in (".yaml", ".yml"):
        import yaml

        out.write_text(yaml.safe_dump(kept + entries, sort_keys=False, allow_unicode=True))
    else:
        out.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in kept + entries))
    return len(entries)


def read_raw(path: Path) -> list[dict[str, Any]]:
    """The entries of a user file as written (for merging), [] when it does not exist yet."""
    if not path.exists():
        return []
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text) or []
        data = data.get("models", []) if isinstance(data, dict) else data
        return [e for e in data if isinstance(e, dict)]
    return [
        json.loads(line) for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
