"""The Hugging Face inference protocol, per task: request bodies in, runtime results out.

Requests are read the way huggingface_hub's InferenceClient sends them to an Inference Endpoint
(`InferenceClient(model=URL)`): image and audio tasks post the raw file, or JSON with the file in
base64 when parameters come along; text tasks post JSON `{"inputs": ..., "parameters": {...}}`;
chat posts an OpenAI-style body to `.../v1/chat/completions`. Answers have the shapes the client
parses: label lists, `[{"generated_text"}]`, PNG or WAV bytes, masks as base64 PNGs, and so on.
ControlNet tasks ("<c>-control", "<c>-text-to-image") speak image-to-image, as the controller's
hosted endpoint calls them. Everything here is pure data handling: no framework, no model.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from models_local.serve.jobs import Media, Output

IMAGE_TASKS = {
    "image-classification",
    "object-detection",
    "image-segmentation",
    "image-to-text",
    "depth-estimation",
    "image-to-image",
}
AUDIO_TASKS = {"automatic-speech-recognition", "audio-classification", "audio-to-audio"}
IMAGE_OUT = {"text-to-image", "image-to-image", "depth-estimation"}
# File signatures: the loaders read content, not names, but a file should still be named sensibly.
_MAGIC = (
    (b"\x89PNG", ".png"),
    (b"\xff\xd8", ".jpg"),
    (b"GIF8", ".gif"),
    (b"BM", ".bmp"),
    (b"fLaC", ".flac"),
    (b"OggS", ".ogg"),
    (b"ID3", ".mp3"),
)


class BadInput(ValueError):
    """The request cannot be read for this task; the message says what is wrong."""


@dataclass
class Parsed:
    calls: list[tuple[dict[str, str], dict[str, Media]]]  # one runtime call each: text inputs, files
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def seed(self) -> int | None:
        seed = self.parameters.get("seed")
        if seed is None:
            return None
        try:
            return int(seed)
        except (TypeError, ValueError):
            raise BadInput(f"parameters.seed must be an integer, not {seed!r}") from None


def is_controlnet(task: str) -> bool:
    return task.endswith("-control") or (task.endswith("-text-to-image") and task != "text-to-image")


def _suffix(data: bytes, default: str) -> str:
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return ".wav"
    return next((suffix for magic, suffix in _MAGIC if data.startswith(magic)), default)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise BadInput("the body is not JSON") from None


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise BadInput(f"{what} must be a base64 string")
    try:
        return base64.b64decode(
            value.split(",", 1)[-1] if value.startswith("data:") else value, validate=True
        )
    except (binascii.Error, ValueError):
        raise BadInput(f"{what} is not valid base64") from None


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise BadInput(f"{what} must be a string")
    return value


def _media(data: bytes, kind: str) -> Media:
    if not data:
        raise BadInput(f"the request carries no {kind}")
    return Media(data, _suffix(data, ".png" if kind == "image" else ".wav"))


def _table_csv(table: Any) -> str:
    """{"column": [values, ...]} (the protocol's table) -> CSV text with a header (the runtime's)."""
    if not isinstance(table, dict) or not table or not all(isinstance(v, list) for v in table.values()):
        raise BadInput('"table" must map column names to lists of values')
    rows = max(len(v) for v in table.values())
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(list(table))
    for i in range(rows):
        writer.writerow([col[i] if i < len(col) else "" for col in table.values()])
    return buf.getvalue()


def _chat_text(payload: dict) -> str:
    """The last user turn of an OpenAI-style chat body: what the local runtime replies to."""
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadInput('a chat request needs a non-empty "messages" list')
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise BadInput("a chat request needs a user message")
    content = users[-1].get("content")
    if isinstance(content, list):  # content parts: the text ones
        content = " ".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return _text(content, "the user message's content")


def decode(task: str, body: bytes, content_type: str, *, chat: bool = False) -> Parsed:
    """Read a request for `task`; raises BadInput with a message the client can act on."""
    binary = not content_type.lower().startswith("application/json")
    if chat:
        payload = _json(body)
        return Parsed([({"text": _chat_text(payload)}, {})], {"seed": payload.get("seed")})
    if task in IMAGE_TASKS or task in AUDIO_TASKS or is_controlnet(task):
        kind = "audio" if task in AUDIO_TASKS else "image"
        if binary:
            media, payload = body, {}
        else:
            payload = _json(body)
            if not isinstance(payload, dict) or "inputs" not in payload:
                raise BadInput('a JSON body needs "inputs" (the file in base64)')
            media = _b64(payload["inputs"], '"inputs"')
        params = payload.get("parameters") or {}
        if not isinstance(params, dict):
            raise BadInput('"parameters" must be an object')
        inputs = {}
        if isinstance(params.get("prompt"), str) and params["prompt"]:
            inputs["text"] = params["prompt"]  # image-to-image and ControlNet prompts
        if task == "image-segmentation":
            inputs["masks"] = "png"
        inputs.update(_options(task, params))
        return Parsed([(inputs, {kind: _media(media, kind)})], params)
    payload = _json(body)
    if not isinstance(payload, dict):
        raise BadInput("the body must be a JSON object")
    params = payload.get("parameters") or {}
    if not isinstance(params, dict):
        raise BadInput('"parameters" must be an object')
    raw = payload.get("inputs")
    if task == "visual-question-answering":  # the client sends the image twice: inputs and image
        image = _b64(payload.get("image", raw), '"image"')
        nested = raw.get("question") if isinstance(raw, dict) else None
        question = _text(payload.get("question") or nested, '"question"')
        return Parsed([({"text": question}, {"image": _media(image, "image")})], params)
    if task == "document-question-answering":
        if not isinstance(raw, dict):
            raise BadInput('"inputs" must be {"question": ..., "image": base64}')
        page = _media(_b64(raw.get("image"), '"inputs.image"'), "image")
        return Parsed([({"text": _text(raw.get("question"), '"inputs.question"')}, {"image": page})], params)
    if task == "question-answering":
        if not isinstance(raw, dict):
            raise BadInput('"inputs" must be {"question": ..., "context": ...}')
        question = _text(raw.get("question"), '"inputs.question"')
        return Parsed(
            [({"text": question, "context": _text(raw.get("context"), '"inputs.context"')}, {})], params
        )
    if task == "sentence-similarity":
        if not isinstance(raw, dict) or not isinstance(raw.get("sentences"), list) or not raw["sentences"]:
            raise BadInput('"inputs" must be {"source_sentence": ..., "sentences": [...]}')
        source = _text(raw.get("source_sentence"), '"inputs.source_sentence"')
        others = [_text(s, "each of inputs.sentences") for s in raw["sentences"]]
        return Parsed([({"text": source, "text2": other}, {}) for other in others], params)
    if task == "tabular-classification":
        table = payload.get("table")
        if table is None and isinstance(raw, dict):  # the older {"inputs": {"data": table}} form
            table = raw.get("data")
        return Parsed([({"text": _table_csv(table)}, {})], params)
    if payload.get("stream"):
        raise BadInput("streamed answers are not served here: send stream=false")
    return Parsed([({"text": _text(raw, '"inputs"')} | _options(task, params), {})], params)


def _options(task: str, params: dict[str, Any]) -> dict[str, str]:
    """Protocol parameters the runtime's handlers take as inputs; the others are ignored."""
    by_task: dict[str, dict[str, tuple[str, type[float] | type[int]]]] = {
        "object-detection": {"threshold": ("threshold", float)},
        "text-to-image": {"num_inference_steps": ("steps", int)},
        "image-to-image": {"num_inference_steps": ("steps", int)},
    }
    wanted = by_task.get(task, {})
    options = {}
    for param, (name, kind) in wanted.items():
        if params.get(param) is not None:
            try:
                options[name] = str(kind(params[param]))
            except (TypeError, ValueError):
                raise BadInput(f"parameters.{param} must be a number") from None
    return options


# ---- answers ---------------------------------------------------------------------------------------


def _first(outputs: list[Output], kind: str) -> Output:
    found = next((o for o in outputs if o.kind == kind), None)
    if found is None:
        raise ValueError(f"the model returned no {kind}")
    return found


def _b64_out(output: Output) -> str:
    return base64.b64encode(output.data or b"").decode()


def _chat_completion(text: str, model: str) -> dict:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "models_local",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _answer(task: str, out: list[Output]) -> Any:
    """The JSON answer for one call of a task that answers in JSON."""

    def text() -> str:
        return _first(out, "text").value

    def data() -> Any:
        return _first(out, "data").value

    if task == "text-classification":
        return [data()]  # one list of labels per input, as hf-inference answers
    if task in ("image-classification", "audio-classification"):
        return data()
    if task == "token-classification":
        return [
            {
                "entity_group": e["entity"],
                "score": e["score"],
                "word": e["word"],
                "start": e["start"],
                "end": e["end"],
            }
            for e in data()
        ]
    if task == "summarization":
        return [{"summary_text": text()}]
    if task == "translation":
        return [{"translation_text": text()}]
    if task in ("text-generation", "text2text-generation", "conversational", "image-to-text"):
        return [{"generated_text": text()}]
    if task == "question-answering":
        return data()
    if task == "tabular-classification":
        return [row["label"] for row in data()]
    if task == "object-detection":
        return [{"label": d["label"], "score": d["score"], "box": d["box"]} for d in data()]
    if task == "image-segmentation":
        masks = [o for o in out if o.kind == "image"][1:]  # after the overlay: one mask per segment
        return [
            {"label": d["label"], "score": d["score"], "mask": _b64_out(m)}
            for d, m in zip(data(), masks, strict=True)
        ]
    if task in ("visual-question-answering", "document-question-answering"):
        scored = next((o.value for o in out if o.kind == "data"), None)
        return scored if scored else [{"answer": text()}]
    if task == "automatic-speech-recognition":
        return {"text": text()}
    if task == "audio-to-audio":
        clips = [o for o in out if o.kind == "audio"]
        if not clips:
            raise ValueError("the model returned no audio")
        return [
            {"label": f"audio-{i}", "content-type": "audio/wav", "blob": _b64_out(c)}
            for i, c in enumerate(clips)
        ]
    raise ValueError(f"no protocol answer for task {task!r}")


def encode(
    task: str, replies: list[list[Output]], *, chat: bool = False, model: str = ""
) -> tuple[str, bytes]:
    """(content type, body) for the outputs of each call of a request; raises ValueError when the
    model's results do not have what the task's answer needs."""
    out = replies[0]
    if chat:
        return "application/json", json.dumps(_chat_completion(_first(out, "text").value, model)).encode()
    if task in IMAGE_OUT or is_controlnet(task):
        return "image/png", _first(out, "image").data or b""
    if task == "text-to-speech":
        return "audio/wav", _first(out, "audio").data or b""
    if task == "text-to-video":
        return "video/mp4", _first(out, "video").data or b""
    if task == "sentence-similarity":
        value: Any = [_first(o, "data").value["similarity"] for o in replies]
    else:
        value = _answer(task, out)
    return "application/json", json.dumps(value).encode()
