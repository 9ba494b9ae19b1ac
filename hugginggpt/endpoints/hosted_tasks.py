"""What each task sends through huggingface_hub's InferenceClient, and how its answer becomes artifacts.

Outputs are normalised to the same artifacts the local runtime makes: PNG images, WAV audio,
detections as data + an annotated image + a text summary, labels as text + data.
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hugginggpt.files.artifacts import Artifact, ArtifactKind
from hugginggpt.tasks import CONTROLS

# --- calls: one per task, on an InferenceClient whose model is already set --------------------


def media(inputs: dict[str, Any], name: str) -> Path:
    return Path(inputs[name])


def _seed(inputs: dict[str, Any]) -> dict[str, int]:
    """The seed argument, for the calls whose client method takes one."""
    return {"seed": int(inputs["seed"])} if inputs.get("seed") is not None else {}


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
    reply = client.chat_completion(messages=[{"role": "user", "content": inputs["text"]}], **_seed(inputs))
    return reply.choices[0].message.content or ""


@dataclass(frozen=True)
class TaskOp:
    hf_task: str  # the task name huggingface_hub's providers know it by
    call: Callable[[Any, dict[str, Any]], Any]
    shape: str  # how to turn the result into artifacts: a key of _SHAPES
    # The hf-inference protocol (a model's own endpoint URL) speaks this task. Not text-to-video:
    # only providers' own APIs serve it.
    by_url: bool = True


def _image_to_image(client: Any, inputs: dict[str, Any]) -> Any:
    # The client sends extra keyword arguments as parameters: the seed among them.
    return client.image_to_image(media(inputs, "image"), prompt=inputs.get("text") or None, **_seed(inputs))


OPS: dict[str, TaskOp] = {
    "text-classification": TaskOp(
        "text-classification", lambda c, i: c.text_classification(i["text"]), "labels"
    ),
    "token-classification": TaskOp(
        "token-classification", lambda c, i: c.token_classification(i["text"]), "tokens"
    ),
    # hf-inference serves text2text models under text-generation.
    "text2text-generation": TaskOp(
        "text-generation", lambda c, i: c.text_generation(i["text"], **_seed(i)), "text"
    ),
    "summarization": TaskOp("summarization", lambda c, i: c.summarization(i["text"]).summary_text, "text"),
    "translation": TaskOp("translation", lambda c, i: c.translation(i["text"]).translation_text, "text"),
    "question-answering": TaskOp(
        "question-answering",
        lambda c, i: c.question_answering(question=i["text"], context=i["context"]),
        "answer",
    ),
    "conversational": TaskOp("conversational", _chat, "text"),
    "text-generation": TaskOp(
        "text-generation", lambda c, i: c.text_generation(i["text"], **_seed(i)), "text"
    ),
    "sentence-similarity": TaskOp(
        "sentence-similarity",
        lambda c, i: c.sentence_similarity(i["text"], other_sentences=[i["text2"]]),
        "similarity",
    ),
    "tabular-classification": TaskOp(
        "tabular-classification", lambda c, i: c.tabular_classification(table=_table(i["text"])), "rows"
    ),
    "object-detection": TaskOp(
        "object-detection", lambda c, i: c.object_detection(media(i, "image")), "detection"
    ),
    "image-classification": TaskOp(
        "image-classification", lambda c, i: c.image_classification(media(i, "image")), "labels"
    ),
    "image-to-text": TaskOp(
        "image-to-text", lambda c, i: c.image_to_text(media(i, "image")).generated_text, "text"
    ),
    "text-to-image": TaskOp("text-to-image", lambda c, i: c.text_to_image(i["text"], **_seed(i)), "image"),
    "image-to-image": TaskOp("image-to-image", _image_to_image, "image"),
    "image-segmentation": TaskOp(
        "image-segmentation", lambda c, i: c.image_segmentation(media(i, "image")), "segmentation"
    ),
    "text-to-speech": TaskOp("text-to-speech", lambda c, i: c.text_to_speech(i["text"]), "audio"),
    "automatic-speech-recognition": TaskOp(
        "automatic-speech-recognition",
        lambda c, i: c.automatic_speech_recognition(media(i, "audio")).text,
        "text",
    ),
    "audio-to-audio": TaskOp("audio-to-audio", lambda c, i: c.audio_to_audio(media(i, "audio")), "audios"),
    "audio-classification": TaskOp(
        "audio-classification", lambda c, i: c.audio_classification(media(i, "audio")), "labels"
    ),
    "visual-question-answering": TaskOp(
        "visual-question-answering",
        lambda c, i: c.visual_question_answering(media(i, "image"), question=i["text"]),
        "answers",
    ),
    "document-question-answering": TaskOp(
        "document-question-answering",
        lambda c, i: c.document_question_answering(media(i, "image"), question=i["text"]),
        "answers",
    ),
    "text-to-video": TaskOp(
        "text-to-video", lambda c, i: c.text_to_video(i["text"], **_seed(i)), "video", by_url=False
    ),
}
# depth-estimation: InferenceClient has no method for it, so it is never offered hosted.

# ControlNet has no InferenceClient method either. A model with its own endpoint URL is spoken to
# through the image-to-image protocol: the photo or control image in, the optional prompt along.
CONTROLNET_OPS: dict[str, TaskOp] = {
    f"{c}-{kind}": TaskOp("image-to-image", _image_to_image, "image")
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
        return Artifact(ArtifactKind.IMAGE, path=path)

    def audio(self, blob: bytes, suffix: str = ".wav") -> Artifact:
        import soundfile as sf

        try:
            samples, rate = sf.read(io.BytesIO(blob), dtype="float32")
        except (RuntimeError, TypeError) as exc:  # soundfile's LibsndfileError is a RuntimeError
            raise ValueError(f"the server sent audio that could not be decoded ({exc})") from None
        path = self.path(suffix)
        sf.write(path, samples, rate, format="WAV")
        return Artifact(ArtifactKind.AUDIO, path=path)


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
    return [Artifact(ArtifactKind.TEXT, value=str(result))]


def _labels(result: Any, out: _Out) -> list[Artifact]:
    items = _plain(_as_list(result))
    return [Artifact(ArtifactKind.TEXT, value=_labels_line(items)), Artifact(ArtifactKind.DATA, value=items)]


def _tokens(result: Any, out: _Out) -> list[Artifact]:
    items = _plain(_as_list(result))
    text = ", ".join(f"{it['word']}: {it.get('entity_group') or it.get('entity')}" for it in items)
    return [
        Artifact(ArtifactKind.TEXT, value=text or "no entities found"),
        Artifact(ArtifactKind.DATA, value=items),
    ]


def _answer(result: Any, out: _Out) -> list[Artifact]:
    data = _plain(result)
    return [Artifact(ArtifactKind.TEXT, value=data["answer"]), Artifact(ArtifactKind.DATA, value=data)]


def _answers(result: Any, out: _Out) -> list[Artifact]:
    items = _plain(_as_list(result))
    if not items:
        raise ValueError("the server returned no answer")
    return [
        Artifact(ArtifactKind.TEXT, value=str(items[0].get("answer") or "")),
        Artifact(ArtifactKind.DATA, value=items),
    ]


def _similarity(result: Any, out: _Out) -> list[Artifact]:
    scores = [float(s) for s in result]
    return [
        Artifact(ArtifactKind.TEXT, value=f"similarity {scores[0]:.3f}"),
        Artifact(ArtifactKind.DATA, value={"scores": scores}),
    ]


def _rows(result: Any, out: _Out) -> list[Artifact]:
    labels = _plain(result)
    return [
        Artifact(ArtifactKind.TEXT, value=", ".join(str(x) for x in labels)),
        Artifact(ArtifactKind.DATA, value={"labels": labels}),
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
    return [Artifact(ArtifactKind.VIDEO, path=path)]


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
    return [
        out.image(canvas),
        Artifact(ArtifactKind.TEXT, value=text),
        Artifact(ArtifactKind.DATA, value=items),
    ]


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
    return [
        out.image(blended),
        Artifact(ArtifactKind.TEXT, value=text),
        Artifact(ArtifactKind.DATA, value=items),
    ]


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


def to_artifacts(op: TaskOp, result: Any, inputs: dict[str, Any], out_dir: Path, task: str) -> list[Artifact]:
    """The artifacts for a task's raw result; files go under `out_dir`. Raises on an unexpected shape."""
    out = _Out(out_dir, task)
    if op.shape in _IMAGE_SHAPES:
        return _IMAGE_SHAPES[op.shape](result, out, media(inputs, "image"))
    return _SHAPES[op.shape](result, out)
