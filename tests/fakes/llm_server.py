"""A fake OpenAI-compatible chat server on 127.0.0.1, scripted per pipeline stage.

    with FakeLLMServer() as llm:
        llm.script("plan", '{"tasks": [...]}')          # replies for the planning stage, in order
        llm.script("select", Reply(status=429), '{...}') # an error first, then a JSON answer
        llm.script("respond", "The answer.")
        client = OpenAI(base_url=llm.url, api_key="x")

The stage of a request is read from the first line of its system message ("# Stage: plan" etc., as
the project's prompt templates write it); requests without one count as stage "chat". When a stage's
queue has one reply left, that reply is repeated. `llm.requests` records every request body with its
stage. It speaks plain and streamed (SSE) completions, `response_format` (refused with HTTP 400 when
`reject_schema=True`), usage counts, HTTP errors and slow replies.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from tests.fakes.serving import POLL_SECONDS


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    delay: float = 0.0  # seconds before the server answers
    chunk_delay: float = 0.0  # seconds between streamed chunks
    raw: str | None = None  # sent as the whole body, as application/json, instead of a completion
    end_after: int | None = None  # a stream ends after this many pieces: no finish reason, no [DONE]
    reset_after: int | None = None  # the connection is dropped after this many streamed pieces
    chunk_chars: int | None = None  # stream pieces of this many characters (else word by word)
    trickle: float = 0.0  # seconds between single bytes of a streamed reply (no piece is ever whole)


class FakeLLMServer:
    def __init__(self, *, reject_schema: bool = False, latency: float = 0.0):
        self.reject_schema = reject_schema
        self.latency = latency  # added to every reply
        self.requests: list[dict[str, Any]] = []
        self.dropped_streams = 0  # streamed replies whose client hung up before the end
        self.hung_up_at: list[float] = []  # time.monotonic() when a trickled reply found its client gone
        self.responder: Callable[[str, dict[str, Any]], Reply | str] | None = None
        self._queues: dict[str, list[Reply]] = defaultdict(list)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/v1"

    def script(self, stage: str, *replies: Reply | str) -> FakeLLMServer:
        with self._lock:
            self._queues[stage].extend(r if isinstance(r, Reply) else Reply(r) for r in replies)
        return self

    def reset(self) -> None:
        """Forget the scripted replies and the recorded requests."""
        with self._lock:
            self._queues.clear()
            self.requests.clear()

    def stages(self) -> list[str]:
        return [r["stage"] for r in self.requests]

    def __enter__(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, stage: str, body: dict[str, Any]) -> Reply:
        if self.responder is not None:
            reply = self.responder(stage, body)
            return reply if isinstance(reply, Reply) else Reply(reply)
        with self._lock:
            queue = self._queues.get(stage) or self._queues.get("*")
            if not queue:
                return Reply(f"no scripted reply for stage {stage!r}", status=500)
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    return self._json(404, {"error": {"message": f"no route {self.path}"}})
                stage = stage_of(body.get("messages", []))
                with fake._lock:
                    fake.requests.append({"stage": stage, **body})
                if fake.reject_schema and body.get("response_format", {}).get("type") == "json_schema":
                    return self._json(
                        400, {"error": {"message": "response_format json_schema is not supported"}}
                    )
                reply = fake._next(stage, body)
                time.sleep(fake.latency + reply.delay)
                if reply.status != 200:
                    return self._json(reply.status, {"error": {"message": reply.content or "scripted error"}})
                if reply.raw is not None:  # e.g. a proxy's error page that calls itself JSON
                    data = reply.raw.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return None
                usage = {
                    "prompt_tokens": sum(len(str(m.get("content", "")).split()) for m in body["messages"]),
                    "completion_tokens": len(reply.content.split()),
                }
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                if body.get("stream"):
                    return self._stream(body, reply, usage)
                self._json(
                    200,
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply.content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": usage,
                    },
                )

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], reply: Reply, usage: dict[str, int]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                base = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "fake",
                }
                if reply.trickle:
                    return self._trickle(base, reply)
                for n, piece in enumerate(_pieces(reply)):
                    if n == reply.end_after:  # the stream just ends, as a cut connection through a proxy
                        self.close_connection = True
                        return
                    if n == reply.reset_after:  # the connection breaks mid-answer
                        linger = struct.pack("ii", 1, 0)  # close with a reset, not a clean end
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                        self.connection.close()
                        self.close_connection = True
                        return
                    chunk = {
                        **base,
                        "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                    }
                    try:
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                    except OSError:  # the client closed the stream
                        with fake._lock:
                            fake.dropped_streams += 1
                        self.close_connection = True
                        return
                    time.sleep(reply.chunk_delay)
                end = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                self.wfile.write(f"data: {json.dumps(end)}\n\n".encode())
                if body.get("stream_options", {}).get("include_usage"):
                    self.wfile.write(
                        f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n".encode()
                    )
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _trickle(self, base: dict[str, Any], reply: Reply) -> None:
                chunk = {**base, "choices": [{"index": 0, "delta": {"content": reply.content}}]}
                end = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                data = f"data: {json.dumps(chunk)}\n\ndata: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode()
                self.close_connection = True
                for n in range(len(data)):
                    try:
                        self.wfile.write(data[n : n + 1])
                        self.wfile.flush()
                    except OSError:
                        with fake._lock:
                            fake.dropped_streams += 1
                            fake.hung_up_at.append(time.monotonic())
                        return
                    time.sleep(reply.trickle)

        return Handler


def stage_of(messages: list[dict[str, Any]]) -> str:
    for message in messages:
        if message.get("role") == "system":
            match = re.match(r"#\s*Stage:\s*(\w+)", str(message.get("content", "")))
            return match.group(1) if match else "chat"
    return "chat"


def _pieces(reply: Reply) -> list[str]:
    if reply.chunk_chars:
        size = reply.chunk_chars
        return [reply.content[i : i + size] for i in range(0, len(reply.content), size)]
    return re.findall(r"\S+\s*|\s+", reply.content)
