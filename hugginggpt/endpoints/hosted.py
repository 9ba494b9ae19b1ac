"""Hosted inference: run a task through huggingface_hub's InferenceClient.

A model card with `endpoint_url` is called at that URL (an Inference Endpoint, a TGI server, any
server speaking the HF inference protocol); otherwise the hub id goes to the configured provider.
Outputs are normalised to the same artifacts the local runtime makes: PNG images, WAV audio,
detections as data + an annotated image + a text summary, labels as text + data.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..artifacts import Artifact
from ..catalog import ModelCard
from ..tasks import CONTROLS
from ..text import shorten
from .base import Endpoint, EndpointError, ModelUnavailable, Stopped, StopSignal

# Hosts that belong to Hugging Face: the HF token may always be sent there. Any other endpoint
# URL (it comes from a catalog card, which a user may have added) gets it only when allowed.
HF_HOSTS = ("huggingface.co", "huggingface.cloud", "hf.space")
# What huggingface_hub's provider helpers say, before any request, when they cannot serve a model.
REFUSALS = ("not supported", "doesn't support", "No provider mapping", "must provide an api_key")
RETRY_STATUS = {503: "the model is still loading (HTTP 503)", 429: "rate limited (HTTP 429)"}


# --- calls: one per task, on an InferenceClient whose model is already set --------------------


def _media(inputs: dict[str, Any], name: str) -> Path:
    return Path(inputs[name])


def _table(csv_text: str) -> dict[str, list[str]]:
    """CSV text with a header line -> the column-wise table the tabular tasks take."""
    rows = list(csv.reader(io.StringIO(csv_text.strip())))
    if len(rows) < 2:
        raise ValueError("tabular input needs a header line and at least one row")
    header, body = rows[0], rows[1:]
    return {
        col.strip(): [row[i].strip() if i < len(row) else "" for row in body] for i, col in enumerate(header)
    }


def _chat(client: Any, inputs: dict[str, Any]) -> str:
    reply = client.chat_completion(messages=[{"role": "user", "content": inputs["text"]}])
    return reply.choices[0].message.content or ""


@dataclass(frozen=True)
class _Op:
    hf_task: str  # the task name huggingface_hub's providers know it by
    call: Callable[[Any, dict[str, Any]], Any]
    shape: str  # how to turn the result into artifacts: a key of _SHAPES


def _image_to_image(client: Any, inputs: dict[str, Any]) -> Any:
    return client.image_to_image(_media(inputs, "image"), prompt=inputs.get("text") or None)


OPS: dict[str, _Op] = {
    "text-classification": _Op(
        "text-classification", lambda c, i: c.text_classification(i["text"]), "labels"
    ),
    "token-classification": _Op(
        "token-classification", lambda c, i: c.token_classification(i["text"]), "tokens"
    ),
    # hf-inference serves text2text models under text-generation.
    "text2text-generation": _Op("text-generation", lambda c, i: c.text_generation(i["text"]), "text"),
    "summarization": _Op("summarization", lambda c, i: c.summarization(i["text"]).summary_text, "text"),
    "translation": _Op("translation", lambda c, i: c.translation(i["text"]).translation_text, "text"),
    "question-answering": _Op(
        "question-answering",
        lambda c, i: c.question_answering(question=i["text"], context=i["context"]),
        "answer",
    ),
    "conversational": _Op("conversational", _chat, "text"),
    "text-generation": _Op("text-generation", lambda c, i: c.text_generation(i["text"]), "text"),
    "sentence-similarity": _Op(
        "sentence-similarity",
        lambda c, i: c.sentence_similarity(i["text"], other_sentences=[i["text2"]]),
        "similarity",
    ),
    "tabular-classification": _Op(
        "tabular-classification", lambda c, i: c.tabular_classification(table=_table(i["text"])), "rows"
    ),
    "object-detection": _Op(
        "object-detection", lambda c, i: c.object_detection(_media(i, "image")), "detection"
    ),
    "image-classification": _Op(
        "image-classification", lambda c, i: c.image_classification(_media(i, "image")), "labels"
    ),
    "image-to-text": _Op(
        "image-to-text", lambda c, i: c.image_to_text(_media(i, "image")).generated_text, "text"
    ),
    "text-to-image": _Op("text-to-image", lambda c, i: c.text_to_image(i["text"]), "image"),
    "image-to-image": _Op("image-to-image", _image_to_image, "image"),
    "image-segmentation": _Op(
        "image-segmentation", lambda c, i: c.image_segmentation(_media(i, "image")), "segmentation"
    ),
    "text-to-speech": _Op("text-to-speech", lambda c, i: c.text_to_speech(i["text"]), "audio"),
    "automatic-speech-recognition": _Op(
        "automatic-speech-recognition",
        lambda c, i: c.automatic_speech_recognition(_media(i, "audio")).text,
        "text",
    ),
    "audio-to-audio": _Op("audio-to-audio", lambda c, i: c.audio_to_audio(_media(i, "audio")), "audios"),
    "audio-classification": _Op(
        "audio-classification", lambda c, i: c.audio_classification(_media(i, "audio")), "labels"
    ),
    "visual-question-answering": _Op(
        "visual-question-answering",
        lambda c, i: c.visual_question_answering(_media(i, "image"), question=i["text"]),
        "answers",
    ),
    "document-question-answering": _Op(
        "document-question-answering",
        lambda c, i: c.document_question_answering(_media(i, "image"), question=i["text"]),
        "answers",
    ),
    "text-to-video": _Op("text-to-video", lambda c, i: c.text_to_video(i["text"]), "video"),
}
# depth-estimation: InferenceClient has no method for it, so it is never offered hosted.

# ControlNet has no InferenceClient method either. A model with its own endpoint URL is spoken to
# through the image-to-image protocol: the photo or control image in, the optional prompt along.
CONTROLNET_OPS: dict[str, _Op] = {
    f"{c}-{kind}": _Op("image-to-image", _image_to_image, "image")
    for c in CONTROLS
    for kind in ("control", "text-to-image")
}


# --- outputs -> artifacts ---------------------------------------------------------------------


class _Out:
    """Writes a task's files under out_dir with names that do not collide."""

    def __init__(self, out_dir: Path, task: str) -> None:
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.stem = f"{task}-{uuid.uuid4().hex[:8]}"

    def path(self, suffix: str) -> Path:
        return self.dir / f"{self.stem}{suffix}"

    def image(self, image: Any, suffix: str = ".png") -> Artifact:
        if image.mode not in ("RGB", "RGBA", "L"):
            image = image.convert("RGBA" if "A" in image.mode else "RGB")
        path = self.path(suffix)
        image.save(path, format="PNG")
        return Artifact("image", path=path)

    def audio(self, blob: bytes, suffix: str = ".wav") -> Artifact:
        import soundfile as sf

        try:
            samples, rate = sf.read(io.BytesIO(blob), dtype="float32")
        except (RuntimeError, TypeError) as exc:  # soundfile's LibsndfileError is a RuntimeError
            raise ValueError(f"the server sent audio that could not be decoded ({exc})") from None
        path = self.path(suffix)
        sf.write(path, samples, rate, format="WAV")
        return Artifact("audio", path=path)


def _plain(value: Any) -> Any:
    """InferenceClient results are dict subclasses and lists of them: plain JSON values."""
    return json.loads(json.dumps(value, default=str))


def _as_list(result: Any) -> list:
    return result if isinstance(result, list) else [result]


def _labels_line(items: list[dict]) -> str:
    return ", ".join(
        f"{it['label']} ({it['score']:.2f})" if it.get("score") is not None else str(it["label"])
        for it in items
    )


def _text(result: Any, out: _Out) -> list[Artifact]:
    return [Artifact("text", value=str(result))]


def _labels(result: Any, out: _Out) -> list[Artifact]:
    items = _plain(_as_list(result))
    return [Artifact("text", value=_labels_line(items)), Artifact("data", value=items)]


def _tokens(result: Any, out: _Out) -> list[Artifact]:
    items = _plain(_as_list(result))
    text = ", ".join(f"{it['word']}: {it.get('entity_group') or it.get('entity')}" for it in items)
    return [Artifact("text", value=text or "no entities found"), Artifact("data", value=items)]


def _answer(result: Any, out: _Out) -> list[Artifact]:
    data = _plain(result)
    return [Artifact("text", value=data["answer"]), Artifact("data", value=data)]


def _answers(result: Any, out: _Out) -> list[Artifact]:
    items = _plain(_as_list(result))
    if not items:
        raise ValueError("the server returned no answer")
    return [Artifact("text", value=str(items[0].get("answer") or "")), Artifact("data", value=items)]


def _similarity(result: Any, out: _Out) -> list[Artifact]:
    scores = [float(s) for s in result]
    return [Artifact("text", value=f"similarity {scores[0]:.3f}"), Artifact("data", value={"scores": scores})]


def _rows(result: Any, out: _Out) -> list[Artifact]:
    labels = _plain(result)
    return [
        Artifact("text", value=", ".join(str(x) for x in labels)),
        Artifact("data", value={"labels": labels}),
    ]


def _image(result: Any, out: _Out) -> list[Artifact]:
    return [out.image(result)]


def _audio(result: Any, out: _Out) -> list[Artifact]:
    return [out.audio(result)]


def _audios(result: Any, out: _Out) -> list[Artifact]:
    arts = []
    for i, item in enumerate(result):
        arts.append(out.audio(item.blob, suffix=f"-{i}.wav"))
    if not arts:
        raise ValueError("the server returned no audio")
    return arts


def _video(result: Any, out: _Out) -> list[Artifact]:
    path = out.path(".mp4")
    path.write_bytes(result)
    return [Artifact("video", path=path)]


def _detection(result: Any, out: _Out, image_path: Path) -> list[Artifact]:
    from PIL import Image, ImageDraw

    items = [
        {
            "label": d.label,
            "score": float(d.score),
            "box": {k: float(d.box[k]) for k in ("xmin", "ymin", "xmax", "ymax")},
        }
        for d in result
    ]
    with Image.open(image_path) as src:
        canvas = src.convert("RGB")
    draw = ImageDraw.Draw(canvas)
    for it in items:
        b = it["box"]
        draw.rectangle((b["xmin"], b["ymin"], b["xmax"], b["ymax"]), outline=(255, 0, 0), width=2)
        draw.text((b["xmin"] + 2, b["ymin"] + 2), f"{it['label']} {it['score']:.2f}", fill=(255, 0, 0))
    text = _labels_line(items) if items else "no objects found"
    return [out.image(canvas), Artifact("text", value=text), Artifact("data", value=items)]


def _segmentation(result: Any, out: _Out, image_path: Path) -> list[Artifact]:
    from PIL import Image

    with Image.open(image_path) as src:
        canvas = src.convert("RGB")
    overlay = canvas.copy()
    items = []
    for i, seg in enumerate(result):
        mask = seg.mask.convert("L").resize(canvas.size)
        # A fixed colour per segment, spread around the hue circle.
        colour = Image.new("RGB", canvas.size, _palette(i))
        overlay.paste(colour, mask=mask)
        items.append({"label": seg.label, "score": seg.score})
    blended = Image.blend(canvas, overlay, 0.5)
    text = _labels_line(items) if items else "no segments found"
    return [out.image(blended), Artifact("text", value=text), Artifact("data", value=items)]


def _palette(i: int) -> tuple[int, int, int]:
    import colorsys

    r, g, b = colorsys.hsv_to_rgb((i * 0.618) % 1.0, 0.8, 1.0)
    return int(r * 255), int(g * 255), int(b * 255)


_SHAPES: dict[str, Callable[[Any, _Out], list[Artifact]]] = {
    "text": _text,
    "labels": _labels,
    "tokens": _tokens,
    "answer": _answer,
    "answers": _answers,
    "similarity": _similarity,
    "rows": _rows,
    "image": _image,
    "audio": _audio,
    "audios": _audios,
    "video": _video,
}
_IMAGE_SHAPES = {"detection": _detection, "segmentation": _segmentation}  # these also need the input image


# --- the endpoint -----------------------------------------------------------------------------


def _is_hf_host(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in HF_HOSTS)


def _provider_tasks(provider: str) -> set[str] | None:
    """Tasks a named provider serves, from huggingface_hub's provider table (None: unknown)."""
    try:
        from huggingface_hub.inference._providers import PROVIDERS
    except ImportError:  # private table moved: do not guess, let the call decide
        return None
    return set(PROVIDERS.get(provider, {}))  # type: ignore[arg-type]


class HostedEndpoint(Endpoint):
    name = "hosted"

    def __init__(
        self,
        *,
        token: str | None = None,
        provider: str | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 2.0,
        max_wait: float = 30.0,
        token_for_urls: bool = False,
    ) -> None:
        """`retries`: extra tries after a 503 (model loading) or 429 (rate limit), waiting
        `backoff` * 2**n seconds (or what the server asks, at most `max_wait`) in between.
        `token_for_urls`: also send the HF token to endpoint URLs outside Hugging Face's hosts."""
        token = token if token is not None else os.environ.get("HF_TOKEN")
        # A token pasted with its line ending (a .env file saved on Windows) is no valid header.
        self.token = token.strip() or None if token else None
        self.provider = provider or "auto"
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_wait = max_wait
        self.token_for_urls = token_for_urls

    def describe(self) -> str:
        return f"hosted (huggingface_hub InferenceClient, provider {self.provider})"

    def _op(self, task: str, model: ModelCard) -> _Op | None:
        return OPS.get(task) or (CONTROLNET_OPS.get(task) if model.endpoint_url else None)

    def can_run(self, model: ModelCard) -> bool:
        from huggingface_hub import constants

        op = self._op(model.task, model)
        if op is None or constants.is_offline_mode():
            return False
        if model.endpoint_url:  # a URL always goes through the hf-inference protocol
            served = _provider_tasks("hf-inference")
        elif model.path:  # a local folder has no hosted counterpart
            return False
        elif self.provider == "auto":
            return True  # the Hub picks a provider for the model at call time
        else:
            served = _provider_tasks(self.provider)
        return served is None or op.hf_task in served

    def _client(self, model: ModelCard) -> Any:
        from huggingface_hub import InferenceClient

        if model.endpoint_url:
            headers = None
            if not (_is_hf_host(model.endpoint_url) or self.token_for_urls):
                # None drops the header InferenceClient would otherwise fill from the saved login.
                headers = {"authorization": None}
            token = self.token if headers is None else None
            return InferenceClient(
                model=model.endpoint_url, token=token, timeout=self.timeout, headers=headers
            )
        return InferenceClient(model=model.id, provider=self.provider, token=self.token, timeout=self.timeout)

    def run(
        self,
        task: str,
        model: ModelCard,
        inputs: dict[str, Any],
        out_dir: Path,
        *,
        stop: StopSignal | None = None,
    ) -> list[Artifact]:
        # `stop` ends the retries; an HTTP call in flight cannot be taken back (the time-out bounds it).
        op = self._op(task, model)
        if op is None:
            raise ModelUnavailable(f"{model.id}: hosted inference has no method for task {task!r}")
        where = (
            f"{model.id} at {model.endpoint_url}" if model.endpoint_url else f"{model.id} ({self.provider})"
        )
        try:
            result = self._call_with_retries(op, model, inputs, where, stop)
        except EndpointError as exc:  # messages reach the chat, traces and the LLM: never a token
            raise type(exc)(_redact(str(exc), self.token)) from None
        out = _Out(out_dir, task)
        try:
            if op.shape in _IMAGE_SHAPES:
                return _IMAGE_SHAPES[op.shape](result, out, _media(inputs, "image"))
            return _SHAPES[op.shape](result, out)
        except Exception as exc:
            message = f"{where}: unexpected output for {task}: {shorten(exc)}"
            raise EndpointError(_redact(message, self.token)) from exc

    def _call_with_retries(
        self, op: _Op, model: ModelCard, inputs: dict[str, Any], where: str, stop: StopSignal | None = None
    ) -> Any:
        from huggingface_hub.errors import HfHubHTTPError, InferenceTimeoutError, OfflineModeIsEnabled

        client = self._client(model)
        for attempt in range(self.retries + 1):
            try:
                return op.call(client, inputs)
            except InferenceTimeoutError:
                raise EndpointError(f"{where}: no answer within {self.timeout:g} s (time-out)") from None
            except OfflineModeIsEnabled:
                raise ModelUnavailable(f"{where}: hosted inference is off (HF_HUB_OFFLINE is set)") from None
            except HfHubHTTPError as exc:
                status = exc.response.status_code if exc.response is not None else None
                if status in RETRY_STATUS:
                    if attempt < self.retries:
                        time.sleep(self._wait(exc.response, attempt))
                        if stop is not None and stop.is_set():
                            raise Stopped(f"{where}: stopped") from None
                        continue
                    tries = self.retries + 1
                    raise EndpointError(
                        f"{where}: {RETRY_STATUS[status]}, gave up after {tries} tries"
                    ) from None
                detail = exc.server_message or shorten(exc)
                error = ModelUnavailable if status in (401, 403, 404) else EndpointError
                raise error(f"{where}: HTTP {status}: {shorten(detail)}") from None
            except (KeyError, FileNotFoundError) as exc:
                raise EndpointError(f"{where}: missing input {shorten(exc)}") from None
            except ValueError as exc:  # provider helpers refuse tasks/models they do not serve
                refused = any(phrase in str(exc) for phrase in REFUSALS)
                raise (ModelUnavailable if refused else EndpointError)(f"{where}: {shorten(exc)}") from None
            except Exception as exc:  # noqa: BLE001 (connection refused, DNS, a malformed reply, ...)
                raise EndpointError(f"{where}: {type(exc).__name__}: {shorten(exc)}") from None
        raise AssertionError("unreachable")

    def _wait(self, response: Any, attempt: int) -> float:
        """What the server asks for (Retry-After, or HF's estimated_time while loading), bounded."""
        wait = self.backoff * 2**attempt
        asked = response.headers.get("retry-after")
        if asked is None:
            try:
                asked = json.loads(response.content).get("estimated_time")
            except (ValueError, AttributeError, RuntimeError):  # not JSON, not an object, not read
                asked = None
        try:
            wait = float(asked) if asked is not None else wait
        except ValueError:
            pass
        return max(0.0, min(wait, self.max_wait))


_SECRETS = (re.compile(r"(?i)\b(bearer\s+)\S+"), re.compile(r"\bhf_[A-Za-z0-9]{30,}"))


def _redact(message: str, token: str | None) -> str:
    """The message without the token: an HTTP library may quote the header it refused."""
    if token:
        message = message.replace(token, "***")
    message = _SECRETS[0].sub(lambda m: m.group(1) + "***", message)
    return _SECRETS[1].sub("hf_***", message)
