"""A fake Hugging Face inference server on 127.0.0.1, speaking what InferenceClient(model=URL) sends.

    with FakeHFServer() as hf:
        card = ModelCard(id="fake/detr", task="object-detection", endpoint_url=hf.url_for("object-detection"))
        hf.fail("object-detection", Fault(503), Fault(429, headers={"Retry-After": "0"}))
        ...

Each model URL is http://127.0.0.1:PORT/<task>/<name>; the first path segment says which task the
server plays (chat completions arrive at .../v1/chat/completions). Requests are checked the way a
real server would read them (binary image or audio bodies must decode, JSON bodies must carry
`inputs`), and answers are derived from the input (image size, sample count, words) so a test can
tell that the input really travelled. `loopback_only()` lets huggingface_hub talk to it.
Scripted faults per task are served first, in order:
HTTP errors (503 loading, 429 rate limit, ...) and slow replies for time-outs.
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import soundfile as sf
from PIL import Image

from tests.fakes.serving import POLL_SECONDS


@dataclass
class Fault:
    status: int = 503
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering; with status 200 the real answer follows


@dataclass
class Recorded:
    task: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@contextmanager
def loopback_only() -> Iterator[None]:
    """Lets huggingface_hub make requests again (conftest sets HF_HUB_OFFLINE=1, which refuses all,
    loopback too), but only to 127.0.0.1: any other host fails before a byte leaves."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.utils import _http

    def refuse_other_hosts(request: httpx2.Request) -> None:
        if request.url.host != "127.0.0.1":
            raise ConnectionRefusedError(f"test guard: no requests beyond 127.0.0.1 ({request.url})")

    def factory() -> httpx2.Client:
        hooks = [refuse_other_hosts, _http.hf_request_event_hook]
        return httpx2.Client(event_hooks={"request": hooks}, follow_redirects=True, timeout=None)

    offline = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = False
    _http.set_client_factory(factory)
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = offline
        _http.set_client_factory(_http.default_client_factory)


class BadRequest(Exception):
    pass


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _image(raw: bytes) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(raw))
        image.load()
    except (OSError, ValueError) as exc:  # PIL's UnidentifiedImageError is an OSError
        raise BadRequest(f"body is not an image: {exc}") from None
    return image


def _audio(raw: bytes) -> tuple[np.ndarray, int]:
    try:
        return sf.read(io.BytesIO(raw), dtype="float32")
    except (RuntimeError, TypeError) as exc:  # soundfile's LibsndfileError is a RuntimeError
        raise BadRequest(f"body is not audio: {exc}") from None


def _flac(samples: np.ndarray, rate: int) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, samples, rate, format="FLAC")
    return buf.getvalue()


def _text_inputs(body: bytes) -> Any:
    try:
        payload = json.loads(body)
    except ValueError:
        raise BadRequest("body is not JSON") from None
    if "inputs" not in payload:
        raise BadRequest("JSON body has no 'inputs'")
    return payload["inputs"]


def _binary_inputs(body: bytes, content_type: str) -> tuple[bytes, dict[str, Any]]:
    """Binary tasks: the raw file, or JSON {inputs: base64, parameters, ...} when parameters are sent."""
    if content_type.startswith("application/json"):
        payload = json.loads(body)
        return base64.b64decode(payload["inputs"]), payload
    return body, {}


class FakeHFServer:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._faults: dict[str, list[Fault]] = defaultdict(list)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
        )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def url_for(self, task: str, name: str = "model") -> str:
        return f"{self.base}/{task}/{name}"

    def fail(self, task: str, *faults: Fault) -> FakeHFServer:
        with self._lock:
            self._faults[task].extend(faults)
        return self

    def calls(self, task: str) -> list[Recorded]:
        return [r for r in self.requests if r.task == task]

    def __enter__(self) -> FakeHFServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # --- answers per task: (status, content type, body) ---------------------------------------

    def answer(self, task: str, body: bytes, content_type: str) -> tuple[str, bytes]:
        if task.endswith(("-control", "-text-to-image")):  # ControlNet models speak image-to-image
            task = "image-to-image"
        if task in (
            "image-classification",
            "object-detection",
            "image-segmentation",
            "image-to-text",
            "image-to-image",
        ):
            raw, payload = _binary_inputs(body, content_type)
            image = _image(raw)
            w, h = image.size
            if task == "image-classification":
                return _json([{"label": f"{w}x{h}", "score": 0.9}, {"label": image.mode, "score": 0.1}])
            if task == "object-detection":
                return _json(
                    [
                        {
                            "label": "cat",
                            "score": 0.98,
                            "box": {"xmin": 1, "ymin": 1, "xmax": w // 2, "ymax": h // 2},
                        },
                        {
                            "label": "dog",
                            "score": 0.51,
                            "box": {"xmin": w // 2, "ymin": h // 2, "xmax": w - 1, "ymax": h - 1},
                        },
                    ]
                )
            if task == "image-segmentation":
                left = Image.new("L", (w, h), 0)
                left.paste(255, (0, 0, w // 2, h))
                right = Image.eval(left, lambda v: 255 - v)
                masks = [base64.b64encode(_png(m)).decode() for m in (left, right)]
                return _json(
                    [
                        {"label": "sky", "score": 0.8, "mask": masks[0]},
                        {"label": "sea", "score": 0.7, "mask": masks[1]},
                    ]
                )
            if task == "image-to-text":
                return _json([{"generated_text": f"a {w}x{h} picture"}])
            prompt = (payload.get("parameters") or {}).get("prompt", "")
            out = image.convert("RGB").transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            return "image/png", _png(out.resize((w, h + (len(prompt) % 3))))
        if task in ("automatic-speech-recognition", "audio-classification", "audio-to-audio"):
            raw, _ = _binary_inputs(body, content_type)
            samples, rate = _audio(raw)
            if task == "automatic-speech-recognition":
                return _json({"text": f"{len(samples)} samples at {rate} Hz"})
            if task == "audio-classification":
                return _json([{"label": "speech", "score": 0.7}, {"label": "music", "score": 0.3}])
            blob = base64.b64encode(_flac(samples[::-1].copy(), rate)).decode()
            return _json([{"label": "speech", "content-type": "audio/flac", "blob": blob}])
        if task == "visual-question-answering":
            payload = json.loads(body)
            image = _image(base64.b64decode(payload["image"]))
            return _json([{"answer": f"{payload['question']} -> {image.size[0]}", "score": 0.6}])
        if task == "document-question-answering":
            inputs = _text_inputs(body)
            image = _image(base64.b64decode(inputs["image"]))
            return _json(
                [{"answer": f"{inputs['question']} -> {image.size[1]}", "score": 0.5, "start": 0, "end": 1}]
            )
        if task == "tabular-classification":
            table = json.loads(body)["table"]
            rows = len(next(iter(table.values())))
            return _json([f"class-{i}" for i in range(rows)])
        inputs = _text_inputs(body)
        if task == "question-answering":
            context = inputs["context"]
            return _json(
                {"answer": context.split()[0], "score": 0.9, "start": 0, "end": len(context.split()[0])}
            )
        if task == "sentence-similarity":
            same = sum(w in inputs["source_sentence"].split() for w in inputs["sentences"][0].split())
            return _json([same / max(1, len(inputs["sentences"][0].split()))])
        if not isinstance(inputs, str):
            raise BadRequest("'inputs' must be a string")
        words = inputs.split()
        if task == "text-classification":  # the hf-inference shape: a list per input
            return _json([[{"label": "POSITIVE", "score": 0.8}, {"label": "NEGATIVE", "score": 0.2}]])
        if task == "token-classification":
            return _json(
                [{"entity_group": "PER", "score": 0.9, "word": words[0], "start": 0, "end": len(words[0])}]
            )
        if task == "summarization":
            return _json([{"summary_text": " ".join(words[:3])}])
        if task == "translation":
            return _json([{"translation_text": " ".join(reversed(words))}])
        if task in ("text-generation", "text2text-generation"):
            return _json([{"generated_text": inputs + " and then"}])
        if task == "text-to-image":
            return "image/png", _png(Image.new("RGB", (32 + len(words), 24), (200, 30, 30)))
        if task == "text-to-speech":
            rate = 16000
            t = np.arange(rate // 10 * max(1, len(words))) / rate
            return "audio/flac", _flac((0.3 * np.sin(2 * np.pi * 440 * t)).astype("float32"), rate)
        raise BadRequest(f"the fake server does not play task {task!r}")

    def chat(self, body: bytes) -> tuple[str, bytes]:
        payload = json.loads(body)
        content = payload["messages"][-1]["content"]
        return _json(
            {
                "id": "fake-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": payload.get("model", "dummy"),
                "system_fingerprint": "fake",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": f"you said: {content}"},
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6},
            }
        )

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                task = self.path.strip("/").split("/")[0]
                headers = {k.lower(): v for k, v in self.headers.items()}
                with fake._lock:
                    fake.requests.append(Recorded(task, self.path, headers, body))
                    fault = fake._faults[task].pop(0) if fake._faults[task] else None
                if fault is not None:
                    time.sleep(fault.delay)
                    if fault.status != 200:
                        return self._send(
                            fault.status, *_json(fault.body or _default_error(fault.status)), fault.headers
                        )
                try:
                    if self.path.rstrip("/").endswith("/chat/completions"):
                        answer = fake.chat(body)
                    else:
                        answer = fake.answer(task, body, headers.get("content-type", ""))
                except (BadRequest, KeyError, ValueError) as exc:
                    return self._send(400, *_json({"error": f"bad request: {exc}"}))
                self._send(200, *answer)

            def _send(
                self, status: int, content_type: str, data: bytes, extra: dict[str, str] | None = None
            ) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (extra or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (time-out tests)
                    pass

        return Handler


def _json(value: Any) -> tuple[str, bytes]:
    return "application/json", json.dumps(value).encode()


def _default_error(status: int) -> dict[str, Any]:
    if status == 503:
        return {"error": "Model is currently loading", "estimated_time": 0.01}
    if status == 429:
        return {"error": "Rate limit reached"}
    return {"error": f"HTTP {status}"}
