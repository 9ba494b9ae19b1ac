"""A fake Hugging Face Hub API on 127.0.0.1, for `python -m hugginggpt.catalog refresh` tests.

    with FakeHub([HubModel("acme/sum", "summarization", downloads=10, readme="...")]) as hub:
        env = {"HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0"}

Serves what HfApi.list_models, HfApi.model_info and a README download need: GET /api/models
(filters pipeline_tag, filter (tags), search (id substring), inference_provider (a provider's
name, or "all"), sort=downloads|likes, limit, expand), GET /api/models/{repo} (expand; an unknown
repo is a 404 with X-Error-Code RepoNotFound, as the Hub answers) and
GET /{repo}/resolve/{revision}/README.md; with blobs=true (files_metadata), a model's `files` and
their sizes as its siblings. A model with a `folder` serves that folder's files as its repo, as
snapshot_download asks for them (GET /api/models/{repo}/revision/{rev}, .../tree/{rev}, HEAD and
GET /{repo}/resolve/{rev}/{file}); `chunk_bytes` and `chunk_seconds` make the files come slowly.
A model's `providers` is its inference provider mapping
({provider: {"status", "task"}}), sent in the Hub's shapes: a list from /api/models, a mapping
from /api/models/{repo}. `hub.requests` records each request's path and query; `api_status=401`
(say) makes /api/models fail with that status.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlparse

from tests.fakes.serving import POLL_SECONDS


@dataclass
class HubModel:
    id: str
    pipeline_tag: str | None
    downloads: int = 0
    likes: int = 0
    library_name: str | None = None
    tags: list[str] = field(default_factory=list)
    card_data: dict[str, Any] | None = None
    safetensors: dict[str, Any] | None = None  # {"parameters": {"F32": n}, "total": n}
    readme: str | None = None
    gated: str | bool = False  # "auto" | "manual" | False
    providers: dict[str, dict[str, str]] = field(default_factory=dict)  # {"fal-ai": {"status", "task"}}
    info_status: int = 200  # /api/models/{id} answers with this HTTP error status when not 200
    files: dict[str, int] = field(default_factory=dict)  # the repo's files and their sizes (blobs=true)
    folder: Path | None = None  # a model folder whose files this repo serves for download

    def served(self) -> dict[str, Path]:
        if self.folder is None:
            return {}
        return {str(p.relative_to(self.folder)): p for p in sorted(self.folder.rglob("*")) if p.is_file()}

    def mapping(self, *, as_list: bool) -> list[dict[str, str]] | dict[str, dict[str, str]]:
        entries = {p: {"providerId": f"{p}/{self.id}", **m} for p, m in self.providers.items()}
        return [{"provider": p, **m} for p, m in entries.items()] if as_list else entries

    def api_json(self, expand: list[str], *, single: bool = False) -> dict[str, Any]:
        full = {
            "_id": self.id,
            "id": self.id,
            "modelId": self.id,
            "downloads": self.downloads,
            "likes": self.likes,
            "library_name": self.library_name,
            "pipeline_tag": self.pipeline_tag,
            "tags": self.tags + ([self.pipeline_tag] if self.pipeline_tag else []),
            "cardData": self.card_data,
            "safetensors": self.safetensors,
            "gated": self.gated,
            "inferenceProviderMapping": self.mapping(as_list=not single),
            "siblings": [{"rfilename": f} for f in self.files] if self.files else None,
        }
        keep = set(expand) if expand else {"downloads", "likes", "library_name", "pipeline_tag", "tags"}
        return {
            k: v for k, v in full.items() if (k in keep or k in ("_id", "id", "modelId")) and v is not None
        }


class FakeHub:
    def __init__(
        self,
        models: list[HubModel],
        *,
        api_status: int = 200,
        chunk_bytes: int = 1 << 20,
        chunk_seconds: float = 0.0,
    ):
        self.models = list(models)
        self.chunk_bytes, self.chunk_seconds = chunk_bytes, chunk_seconds
        self.api_status = api_status  # answer /api/models with this HTTP error status when not 200
        self.requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def list_models(self, query: dict[str, list[str]]) -> list[dict[str, Any]]:
        models = self.models
        if "pipeline_tag" in query:
            models = [m for m in models if m.pipeline_tag == query["pipeline_tag"][0]]
        for tag in query.get("filter", []):
            models = [m for m in models if tag in m.tags or tag == m.library_name]
        if "search" in query:
            models = [m for m in models if query["search"][0].lower() in m.id.lower()]
        for provider in query.get("inference_provider", []):
            models = [m for m in models if m.providers and (provider == "all" or provider in m.providers)]
        sort = query.get("sort", [None])[0]
        if sort in ("downloads", "likes"):
            models = sorted(models, key=lambda m: getattr(m, sort), reverse=True)
        limit = int(query.get("limit", [len(models)])[0])
        return [m.api_json(query.get("expand", [])) for m in models[:limit]]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def _send(self, status: int, body: bytes, content_type: str, headers: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                path = unquote(url.path)
                auth = self.headers.get("authorization")
                hub.requests.append({"path": path, "query": query, "authorization": auth})
                if path == "/api/models" and hub.api_status != 200:
                    body = json.dumps({"error": "Invalid credentials in Authorization header"}).encode()
                    return self._send(hub.api_status, body, "application/json")
                if path == "/api/whoami-v2":  # who the token belongs to (Gradio's local OAuth mock asks)
                    user = {"type": "user", "name": "visitor", "fullname": "A Visitor", "avatarUrl": ""}
                    return self._send(200, json.dumps(user).encode(), "application/json")
                if path == "/api/models":
                    body = json.dumps(hub.list_models(query)).encode()
                    return self._send(200, body, "application/json")
                if path.startswith("/api/models/") and ("/revision/" in path or "/tree/" in path):
                    return self._repo(path.removeprefix("/api/models/"))
                if "/resolve/" in path and not path.endswith("/README.md"):
                    return self._file(path)
                if path.startswith("/api/models/"):
                    repo = path.removeprefix("/api/models/")
                    model = next((m for m in hub.models if m.id == repo), None)
                    if model is None:
                        body = json.dumps({"error": "Repository not found"}).encode()
                        return self._send(404, body, "application/json", {"X-Error-Code": "RepoNotFound"})
                    if model.info_status != 200:
                        body = json.dumps({"error": "Internal Error"}).encode()
                        return self._send(model.info_status, body, "application/json")
                    answer = model.api_json(query.get("expand", []), single=True)
                    if "blobs" in query:  # model_info(files_metadata=True): the default fields and sizes
                        answer["sha"] = "0" * 40
                        answer["cardData"] = model.card_data
                        answer["siblings"] = [{"rfilename": f, "size": n} for f, n in model.files.items()]
                    return self._send(200, json.dumps(answer).encode(), "application/json")
                if "/resolve/" in path and path.endswith("/README.md"):
                    repo = path.strip("/").split("/resolve/")[0]
                    model = next((m for m in hub.models if m.id == repo), None)
                    if model is not None and model.readme is not None:
                        return self._send(200, model.readme.encode(), "text/markdown; charset=utf-8")
                self._send(404, json.dumps({"error": "Entry not found"}).encode(), "application/json")

            do_HEAD = do_GET

            def _model(self, repo: str) -> HubModel | None:
                return next((m for m in hub.models if m.id == repo and m.folder is not None), None)

            def _repo(self, rest: str) -> None:
                """A served repo's revision (its commit and files) or its file tree."""
                kind = "/revision/" if "/revision/" in rest else "/tree/"
                model = self._model(rest.split(kind)[0])
                if model is None:
                    body = json.dumps({"error": "Repository not found"}).encode()
                    return self._send(404, body, "application/json", {"X-Error-Code": "RepoNotFound"})
                files = model.served()
                if kind == "/tree/":
                    tree = [
                        {"type": "file", "oid": _etag(p), "size": p.stat().st_size, "path": name}
                        for name, p in files.items()
                    ]
                    return self._send(200, json.dumps(tree).encode(), "application/json")
                info = {"id": model.id, "sha": COMMIT, "siblings": [{"rfilename": f} for f in files]}
                return self._send(200, json.dumps(info).encode(), "application/json")

            def _file(self, path: str) -> None:
                repo, _, rest = path.strip("/").partition("/resolve/")
                model = self._model(repo)
                file = model.served().get(rest.partition("/")[2]) if model else None
                if file is None:
                    body = json.dumps({"error": "Entry not found"}).encode()
                    return self._send(404, body, "application/json", {"X-Error-Code": "EntryNotFound"})
                body = file.read_bytes()
                self.send_response(200)
                for key, value in {
                    "Content-Type": "application/octet-stream",
                    "Content-Length": str(len(body)),
                    "ETag": f'"{_etag(file)}"',
                    "X-Repo-Commit": COMMIT,
                }.items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command == "HEAD":
                    return
                for start in range(0, len(body), hub.chunk_bytes):  # slowly, as a big file comes
                    self.wfile.write(body[start : start + hub.chunk_bytes])
                    self.wfile.flush()
                    time.sleep(hub.chunk_seconds)

        return Handler


COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _etag(file: Path) -> str:
    return hashlib.sha1(file.read_bytes()).hexdigest()
