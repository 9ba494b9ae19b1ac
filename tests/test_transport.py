"""The transport (hugginggpt/endpoints/transport.py): huggingface_hub is reached through its public
hooks only, and a call's stop travels with that call's own requests."""

from __future__ import annotations

import ast
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hugginggpt.catalog import ModelCard
from hugginggpt.endpoints import Call, EndpointError, HostedEndpoint, transport

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = [p for d in ("hugginggpt", "webui", "models_local") for p in (ROOT / d).rglob("*.py")] + [
    ROOT / "app.py"
]


def private_hub_names(source: str) -> list[str]:
    """Every private huggingface_hub name `source` reaches: a module or an imported name that starts
    with an underscore (`huggingface_hub.utils._http`, `from huggingface_hub.utils import _http`),
    or such an attribute written after a huggingface_hub module (`huggingface_hub._http.X`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("huggingface_hub"):
            names = [*(node.module or "").split("."), *(alias.name for alias in node.names)]
            found += [f"{node.module}: {name}" for name in names if name.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("huggingface_hub") and "._" in a.name]
    found += re.findall(r"huggingface_hub(?:\.\w+)*\._\w+", source)
    return found


def test_no_product_module_uses_a_private_huggingface_hub_name():
    used = {p.relative_to(ROOT).as_posix(): private_hub_names(p.read_text()) for p in PRODUCT}
    assert {path: names for path, names in used.items() if names} == {}


def test_the_check_sees_the_ways_a_private_name_is_reached():
    """What transport.py did before (and the other spellings): each is caught."""
    assert private_hub_names("from huggingface_hub.utils import _http\nx = _http._GLOBAL_CLIENT_FACTORY")
    assert private_hub_names("import huggingface_hub.utils._http")
    assert private_hub_names("from huggingface_hub._inference import x")
    assert private_hub_names("import huggingface_hub\nf = huggingface_hub.utils._http.get_session")
    assert not private_hub_names("from huggingface_hub import get_session, set_client_factory")


class _SlowServer(ThreadingHTTPServer):
    """Answers POST /<name> with a text-classification reply once `release[name]` is set; records
    which callers left before their answer."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.release = {"a": threading.Event(), "b": threading.Event()}
        self.arrived = {"a": threading.Event(), "b": threading.Event()}
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.headers_seen: list[dict[str, str]] = []


class _Handler(BaseHTTPRequestHandler):
    server: _SlowServer

    def do_POST(self) -> None:  # noqa: N802 (the http.server name)
        name = self.path.strip("/")
        self.server.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.arrived[name].set()
        self.server.release[name].wait(30)
        body = json.dumps([{"label": f"answer-{name}", "score": 1.0}]).encode()
        try:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the caller left (its stop): nothing to answer
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def slow_server():
    server = _SlowServer()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    transport.register(server.url)
    try:
        yield server
    finally:
        for event in server.release.values():
            event.set()
        server.shutdown()
        server.server_close()


def test_two_concurrent_calls_each_end_on_their_own_stop(slow_server, tmp_path):
    """Call a's stop ends call a in flight; call b, running meanwhile with its own stop, goes on
    and gets its answer. The stop is the call's, not its thread's nor the process's."""
    endpoint = HostedEndpoint(timeout=60, retries=0)
    stops = {"a": threading.Event(), "b": threading.Event()}
    ended: dict[str, object] = {}

    def call(name: str) -> None:
        card = ModelCard(
            id=f"acme/{name}", task="text-classification", endpoint_url=f"{slow_server.url}/{name}"
        )
        try:
            ended[name] = endpoint.run(
                "text-classification",
                card,
                {"text": "a cat"},
                Call(out_dir=tmp_path / name, stop=stops[name]),
            )
        except EndpointError as exc:
            ended[name] = exc

    threads = {name: threading.Thread(target=call, args=(name,), daemon=True) for name in stops}
    for name, thread in threads.items():
        thread.start()
        assert slow_server.arrived[name].wait(30), f"call {name} never reached the server"
    started = time.monotonic()
    stops["a"].set()
    threads["a"].join(20)
    assert not threads["a"].is_alive() and time.monotonic() - started < 10
    assert isinstance(ended["a"], EndpointError)  # the connection was closed under it
    assert threads["b"].is_alive() and "b" not in ended  # a's stop did not end b
    slow_server.release["b"].set()
    threads["b"].join(20)
    result = ended["b"]
    assert not isinstance(result, Exception), result
    assert result.answered_by == "hosted"
    assert "answer-b" in json.dumps([a.value for a in result.outputs])


def test_the_call_header_never_leaves_and_nothing_is_kept_after_the_call(slow_server, tmp_path):
    slow_server.release["a"].set()
    card = ModelCard(id="acme/a", task="text-classification", endpoint_url=f"{slow_server.url}/a")
    HostedEndpoint(timeout=30, retries=0).run(
        "text-classification", card, {"text": "x"}, Call(out_dir=tmp_path, stop=threading.Event())
    )
    seen = slow_server.headers_seen
    assert len(seen) == 1 and transport.CALL_HEADER not in seen[0]
    assert transport._STOPS == {}
