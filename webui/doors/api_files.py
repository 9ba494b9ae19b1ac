"""Files in and out of calls from other programs (MCP tools, the OpenAI-compatible API).

In: a file arrives as a data URL, bare base64, or an http(s) URL. URLs follow the server's URL rules
(off unless `allow_urls`; public addresses only, size-capped, through hugginggpt.files.urlguard), and every
file then passes the chat's upload checks (webui.host.uploads). Its kind is read from its first bytes,
not from what the client declares.

Out: each generated image, audio clip or video is copied into Gradio's file cache, where the chat's
media live too, and linked as `<root>/gradio_api/file=<cache path>`: the folder name is a keyed hash
(unguessable), and Gradio deletes cached files a day after they were made (`delete_cache` in app.py).
The call's own workspace can therefore be deleted as soon as the call ends.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hugginggpt.config import Settings
from hugginggpt.files import urlguard
from hugginggpt.files.artifacts import MEDIA_KINDS, Artifact, ArtifactKind, kind_of_file
from hugginggpt.run.events import Done
from hugginggpt.run.records import TaskRecord
from hugginggpt.run.run_json import run_json
from hugginggpt.run.run_json import task_json as run_task_json
from webui.host.answer_links import link_outputs
from webui.host.uploads import check_upload

MAX_FILES = 8  # files one call may bring (an OpenAI conversation's earlier turns included)

# First bytes -> suffix, for the image and audio formats the runtime reads.
_MAGIC: list[tuple[int, bytes, str]] = [
    (0, b"\x89PNG\r\n\x1a\n", ".png"),
    (0, b"\xff\xd8\xff", ".jpg"),
    (0, b"GIF87a", ".gif"),
    (0, b"GIF89a", ".gif"),
    (8, b"WEBP", ".webp"),
    (8, b"WAVE", ".wav"),
    (0, b"fLaC", ".flac"),
    (0, b"OggS", ".ogg"),
    (0, b"ID3", ".mp3"),
    (0, b"BM", ".bmp"),
    (0, b"II*\x00", ".tif"),
    (0, b"MM\x00*", ".tif"),
    (4, b"ftypM4A", ".m4a"),
]
_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[^,;]*)*),(?P<data>.*)$", re.S)


class InputRefused(ValueError):
    """A file from a client was not used; the message says why, in words for that client."""


def receive(
    ref: str, folder: Path, *, settings: Settings, max_bytes: int, hint: str = "file", number: int = 1
) -> Path:
    """Save the file `ref` names into `folder` and check it; returns its path, or InputRefused.

    `hint` ("image", "audio") names the saved file; `number` keeps names apart within one call."""
    text = (ref or "").strip()
    shown = f"{hint} {number}"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if text.lower().startswith(("http://", "https://")):
        path = _fetch(text, folder / f"url-{number}", settings=settings, max_bytes=max_bytes)
        shown = path.name
    else:
        blob = _decode(text, max_bytes=max_bytes, shown=shown)
        suffix = _sniff(blob)
        if suffix is None:
            raise InputRefused(
                f"'{shown}' was not used: it is not an image or audio file sent as a data URL, base64 "
                "or an http(s) URL."
            )
        path = folder / f"{hint}-{number}{suffix}"
        path.touch(mode=0o600)
        path.write_bytes(blob)
    problem = check_upload(path, max_bytes=max_bytes, shown_name=shown)
    if problem:
        raise InputRefused(problem)
    return path


def _decode(text: str, *, max_bytes: int, shown: str) -> bytes:
    data = text
    match = _DATA_URL.match(text)
    if text.startswith("data:"):
        if not match or ";base64" not in match.group("params").lower():
            raise InputRefused(f"'{shown}' was not used: a data URL must be base64 (data:<type>;base64,...).")
        data = match.group("data")
    data = re.sub(r"\s+", "", data)
    if not data:
        raise InputRefused(f"'{shown}' was not used: it is empty.")
    if len(data) * 3 // 4 > max_bytes + 2:  # judged before decoding
        raise InputRefused(f"'{shown}' was not used: it is over the {max_bytes / 1e6:.1f} MB limit.")
    try:
        return base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
    except (binascii.Error, ValueError):
        pass
    try:
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))
    except (binascii.Error, ValueError):
        raise InputRefused(
            f"'{shown}' was not used: it is not an image or audio file sent as a data URL, base64 "
            "or an http(s) URL."
        ) from None


def _sniff(blob: bytes) -> str | None:
    for offset, magic, suffix in _MAGIC:
        if blob[offset : offset + len(magic)] == magic:
            return suffix
    if len(blob) > 1 and blob[0] == 0xFF and blob[1] & 0xE0 == 0xE0:  # an MPEG audio frame header
        return ".mp3"
    return None


def _fetch(url: str, folder: Path, *, settings: Settings, max_bytes: int) -> Path:
    if not settings.allow_urls:
        raise InputRefused(
            "This server does not fetch URLs (allow_urls is off): send the file as a data URL "
            "(data:image/png;base64,...) instead."
        )
    try:
        path = urlguard.fetch(url, folder, max_bytes=min(max_bytes, settings.url_max_bytes))
    except urlguard.URLRefused as e:  # refused, or the transfer failed
        raise InputRefused(f"{url} was not used: {e}.") from None
    if kind_of_file(path) is None:  # e.g. https://host/picture?id=3: name it by its content
        with open(path, "rb") as f:
            suffix = _sniff(f.read(16))
        if suffix is not None:
            path = path.rename(path.with_name(path.name[:60] + suffix))
    return path


# ---- out ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    """A generated file as a client fetches it."""

    kind: ArtifactKind
    path: str  # the copy in Gradio's cache (MCP image content is read from it)
    url: str  # absolute


def publish(records: Sequence[TaskRecord], root_url: str) -> dict[Path, Served]:
    """Copy every media output of the run into Gradio's cache; maps each workspace path to its copy."""
    from gradio import processing_utils, utils

    served: dict[Path, Served] = {}
    for record in records:
        for a in record.outputs:
            if a.path is None or a.kind not in MEDIA_KINDS or not Path(a.path).is_file():
                continue
            cached = processing_utils.save_file_to_cache(a.path, utils.get_upload_folder())
            url = f"{root_url.rstrip('/')}/gradio_api/file={quote(cached)}"
            served[Path(a.path)] = Served(a.kind, cached, url)
    return served


def result_json(done: Done, served: dict[Path, Served]) -> dict[str, Any]:
    """A run for a client: hugginggpt.run.run_json's shape, files as URLs (the answer's too)."""
    result = run_json(done, partial(_output, served))
    result["answer"] = answer_with_urls(done.answer, served)
    return result


def answer_with_urls(answer: str, served: dict[Path, Served]) -> str:
    """The answer with each generated file it names linked to the file's absolute URL."""
    by_name = {}
    for path, copy in served.items():
        posix = Path(path).as_posix()
        at = posix.rfind("/outputs/")
        if at >= 0:
            by_name[posix[at + 1 :]] = copy.url
    return link_outputs(answer, by_name.get)


def task_json(record: TaskRecord, served: dict[Path, Served]) -> dict[str, Any]:
    return run_task_json(record, partial(_output, served))


def _output(served: dict[Path, Served], artifact: Artifact) -> dict[str, Any]:
    if artifact.path is None:
        return {"kind": str(artifact.kind), "value": artifact.value}
    copy = served.get(Path(artifact.path))
    return {"kind": str(artifact.kind), "url": copy.url if copy else None}


def root_url(request: Any) -> str:
    """The app's public address as the client reached it (proxy headers honoured, as Gradio does).

    `request`: the Starlette request; its own mount point (e.g. /v1) is not the app's root."""
    from gradio import route_utils

    scope = request.scope
    root_path = scope.get("app_root_path", scope.get("root_path")) or None
    return route_utils.get_root_url(request=request, route_path=request.url.path, root_path=root_path)
