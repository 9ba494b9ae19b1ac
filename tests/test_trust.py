"""Files and URLs the LLM names: confined to the conversation, never private networks."""

import ipaddress
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fakes.serving import serve_in_thread

from hugginggpt.files import urlguard
from hugginggpt.files.urlguard import URLRefused, check_url, fetch, is_public
from hugginggpt.files.workspace import FileRefused, Workspace


@pytest.fixture
def two_conversations(tmp_path):
    a, b = Workspace(tmp_path / "a"), Workspace(tmp_path / "b")
    src = tmp_path / "secret photo!.png"
    src.write_bytes(b"png")
    return a, b, a.add_upload(src)


def test_uploads_get_safe_unique_names(two_conversations, tmp_path):
    a, _, first = two_conversations
    assert a.add_upload(tmp_path / "secret photo!.png") == first  # the same file again: stored once
    (tmp_path / "secret photo!.png").write_bytes(b"another picture")
    second = a.add_upload(tmp_path / "secret photo!.png")
    assert first.name == "secret_photo.png" and second.name == "secret_photo-2.png"
    assert a.resolve("secret_photo.png") == first and a.resolve("/secret_photo.png") == first


@pytest.mark.parametrize(
    "name",
    [
        "../b/uploads/secret_photo.png",
        "../../etc/passwd",
        "uploads/../../b/uploads/secret_photo.png",
        "/etc/passwd",
        "file:///etc/passwd",
        "http://example.com/x.png",
        "",
        "a\x00b",
        "missing.png",
    ],
)
def test_names_outside_the_conversation_are_refused(two_conversations, name):
    a, _, _ = two_conversations
    with pytest.raises(FileRefused):
        a.resolve(name)


def test_another_conversations_file_is_refused_even_by_absolute_path(two_conversations):
    a, b, path = two_conversations
    with pytest.raises(FileRefused):
        b.resolve(str(path))
    assert a.resolve(str(path)) == path


def test_a_link_leading_outside_is_refused(two_conversations, tmp_path):
    a, _, _ = two_conversations
    (tmp_path / "outside.png").write_bytes(b"x")
    os.symlink(tmp_path / "outside.png", a.uploads_dir / "link.png")
    with pytest.raises(FileRefused):
        a.resolve("link.png")


def test_workspace_lists_uploads_and_media_outputs_only(two_conversations):
    a, b, _ = two_conversations
    out = a.run_dir("r1") / "task-0"
    out.mkdir()
    (out / "x.png").write_bytes(b"x")
    (out / "notes.txt").write_text("x")
    assert set(a.files()) == {"secret_photo.png", "outputs/r1/task-0/x.png"}
    assert b.files() == {}


@pytest.mark.parametrize(
    "url, words",
    [
        ("file:///etc/passwd", "only http and https"),
        ("ftp://example.com/x", "only http and https"),
        ("http://127.0.0.1/x.png", "private or local"),
        ("http://localhost/x.png", "private or local"),
        ("http://[::1]/x.png", "private or local"),
        ("http://10.1.2.3/x.png", "private or local"),
        ("http://192.168.0.10/x.png", "private or local"),
        ("http://172.16.5.5/x.png", "private or local"),
        ("http://169.254.169.254/latest/meta-data", "private or local"),
        ("http://[fd00:ec2::254]/", "private or local"),
        ("http://[::ffff:127.0.0.1]/", "private or local"),
        ("http://0.0.0.0/", "private or local"),
        ("http://user:pw@example.com/", "credentials"),
    ],
)
def test_refused_urls(url, words):
    with pytest.raises(URLRefused, match=words):
        check_url(url, resolve=lambda host: [ipaddress.ip_address("127.0.0.1")])


def test_public_address_passes_the_check():
    check_url("https://example.com/cat.png", resolve=lambda host: [ipaddress.ip_address("93.184.215.14")])
    assert is_public(ipaddress.ip_address("8.8.8.8")) and not is_public(ipaddress.ip_address("100.64.0.1"))


class _Server:
    """A loopback server that serves /img and redirects /hop to a private address."""

    def __init__(self):
        body = b"\x89PNG" + b"0" * 100

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                if self.path == "/hop":
                    self.send_response(302)
                    self.send_header("Location", "http://10.0.0.1/secret")
                    self.end_headers()
                elif self.path == "/self":
                    self.send_response(302)
                    self.send_header("Location", "/img")
                    self.end_headers()
                else:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        serve_in_thread(self.httpd)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.httpd.shutdown()


# The test server lives on loopback, which the guard refuses: these tests allow 127.0.0.1 alone.
def only_loopback(address):
    return str(address) == "127.0.0.1"


def test_fetch_downloads_follows_safe_redirects(server, tmp_path):
    path = fetch(f"{server.url}/self", tmp_path, allowed=only_loopback)
    assert path.read_bytes().startswith(b"\x89PNG") and path.parent == tmp_path


def test_redirect_to_a_private_address_is_refused_before_connecting(server, tmp_path):
    with pytest.raises(URLRefused, match="10.0.0.1"):
        fetch(f"{server.url}/hop", tmp_path, allowed=only_loopback)


def test_size_cap(server, tmp_path):
    with pytest.raises(URLRefused, match="larger than"):
        fetch(f"{server.url}/img", tmp_path, allowed=only_loopback, max_bytes=10)
    assert list(tmp_path.iterdir()) == []


def test_default_policy_refuses_the_loopback_server(server, tmp_path):
    with pytest.raises(URLRefused):
        urlguard.fetch(f"{server.url}/img", tmp_path)


def test_fetch_connects_to_the_address_it_checked_not_a_second_dns_answer(server, tmp_path, monkeypatch):
    """DNS rebinding: the name first resolves to an allowed address, then to a forbidden one."""
    import socket

    port = server.httpd.server_port

    class Inside(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"private data")

    inside = ThreadingHTTPServer(("127.0.0.2", port), Inside)  # "the private network", same port
    serve_in_thread(inside)
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1"] + ["127.0.0.2"] * 10)

    def rebinding(host, *args, **kwargs):
        if host == "rebind.test":
            return real(next(answers), *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    try:
        path = fetch(f"http://rebind.test:{port}/img", tmp_path, allowed=only_loopback)
        assert path.read_bytes().startswith(b"\x89PNG")
    finally:
        inside.shutdown()
        inside.server_close()


def test_downloads_with_the_same_file_name_do_not_overwrite_each_other(server, tmp_path):
    first = fetch(f"{server.url}/a/img", tmp_path, allowed=only_loopback)
    second = fetch(f"{server.url}/b/img", tmp_path, allowed=only_loopback)
    assert first != second and first.is_file() and second.is_file()


class _Redirecting:
    """A 'public' LLM server (on 127.0.0.1) that redirects every call to a private one (127.0.0.2)."""

    def __init__(self):
        hits = self.private_hits = []

        class Private(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                hits.append(self.path)
                self.send_response(200)
                self.end_headers()

        self.private = ThreadingHTTPServer(("127.0.0.2", 0), Private)
        target = f"http://127.0.0.2:{self.private.server_port}/v1/chat/completions"

        class Public(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(307)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.public = ThreadingHTTPServer(("127.0.0.1", 0), Public)
        for s in (self.private, self.public):
            serve_in_thread(s)
        self.url = f"http://127.0.0.1:{self.public.server_port}/v1"

    def close(self):
        for s in (self.private, self.public):
            s.shutdown()
            s.server_close()


def test_a_public_only_llm_client_never_reaches_a_private_address_by_redirect(monkeypatch):
    from hugginggpt.llms.interface import LLMError
    from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM

    monkeypatch.setattr(urlguard, "is_public", only_loopback)  # 127.0.0.1 plays the public internet
    servers = _Redirecting()
    try:
        guarded = OpenAICompatibleLLM(
            base_url=servers.url, model="m", api_key="k", timeout=5, max_retries=0, public_only=True
        )
        with pytest.raises(LLMError, match="127.0.0.2"):
            guarded.complete([{"role": "user", "content": "hi"}], stage="plan")
        assert servers.private_hits == []
    finally:
        servers.close()


def test_a_public_only_llm_client_talks_to_public_servers(monkeypatch):
    from fakes.llm_server import FakeLLMServer

    from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM

    monkeypatch.setattr(urlguard, "is_public", only_loopback)
    with FakeLLMServer() as server:
        server.script("chat", "hello")
        llm = OpenAICompatibleLLM(
            base_url=server.url, model="m", api_key="k", timeout=5, max_retries=0, public_only=True
        )
        assert llm.complete([{"role": "user", "content": "hi"}], stage="plan").text == "hello"
        assert "".join(llm.stream([{"role": "user", "content": "hi"}], stage="respond")) == "hello"
        assert server.requests[0]["messages"][0]["content"] == "hi"
