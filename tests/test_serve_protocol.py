"""The expert server without Ray: the protocol app under uvicorn on 127.0.0.1, tiny real models,
spoken to by huggingface_hub's InferenceClient exactly as an Inference Endpoint would be. Every
answer must equal what the in-process runtime makes of the same model, inputs and seed."""

from __future__ import annotations

import io
import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from fakes.hf_inference_server import loopback_only
from PIL import Image
from serve_support import protocol_server
from tiny_text_audio import IRIS_COLUMNS

from models_local.handlers import diffusion
from models_local.serve import create_app
from models_local.serve.models import ModelTable


@pytest.fixture(autouse=True)
def _loopback():
    with loopback_only():  # HF_HUB_OFFLINE would refuse the client's requests, loopback too
        yield


def pixels(data: bytes | Image.Image) -> np.ndarray:
    image = data if isinstance(data, Image.Image) else Image.open(io.BytesIO(data))
    return np.asarray(image.convert("RGB"))


def samples(data: bytes) -> tuple[np.ndarray, int]:
    return sf.read(io.BytesIO(data), dtype="float32")


def post(url: str, body: bytes, content_type: str = "application/json") -> tuple[int, Any]:
    request = urllib.request.Request(url, data=body, headers={"content-type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# ---- every task, as InferenceClient asks for it ----------------------------------------------------


def test_text_tasks_answer_what_the_runtime_answers(served):
    s = served
    labels = s.client("tiny/bert-cls", "text-classification").text_classification("a good cat")
    assert [(x.label, x.score) for x in labels] == [
        (x["label"], x["score"])
        for x in s.local("text-classification", "tiny/bert-cls", text="a good cat")["data"]
    ]
    tags = s.client("tiny/bert-tagger", "token-classification").token_classification("paris is in france")
    local = s.local("token-classification", "tiny/bert-tagger", text="paris is in france")["data"]
    assert [(t.word, t.entity_group, t.score) for t in tags] == [
        (e["word"], e["entity"], e["score"]) for e in local
    ]
    text = "the cat sat on the mat in paris"
    for task, call, field in (
        ("summarization", "summarization", "summary_text"),
        ("translation", "translation", "translation_text"),
    ):
        got = getattr(s.client("tiny/t5", task), call)(text)
        assert getattr(got, field) == s.local(task, "tiny/t5", text=text)["text"]
    assert (
        s.client("tiny/t5", "text2text-generation").text_generation(text)
        == s.local("text2text-generation", "tiny/t5", text=text)["text"]
    )
    assert (
        s.client("tiny/gpt2", "text-generation").text_generation("the cat")
        == s.local("text-generation", "tiny/gpt2", text="the cat")["text"]
    )
    answer = s.client("tiny/bert-qa", "question-answering").question_answering(
        question="where is paris ?", context="paris is in france"
    )
    local = s.local(
        "question-answering", "tiny/bert-qa", text="where is paris ?", context="paris is in france"
    )
    assert dict(answer) == local["data"]
    scores = s.client("tiny/embedder", "sentence-similarity").sentence_similarity(
        "the cat sat", other_sentences=["the cat sat", "where is france ?"]
    )
    expected = [
        s.local("sentence-similarity", "tiny/embedder", text="the cat sat", text2=other)["data"]["similarity"]
        for other in ("the cat sat", "where is france ?")
    ]
    assert scores == expected and scores[0] > scores[1]
    table = {c: ["1.0", "5.1"] for c in reversed(IRIS_COLUMNS)}  # columns out of order: matched by name
    rows = s.client("tiny/skops", "tabular-classification").tabular_classification(table=table)
    csv_text = ",".join(IRIS_COLUMNS) + "\n1.0,1.0,1.0,1.0\n5.1,5.1,5.1,5.1\n"
    assert rows == [
        r["label"] for r in s.local("tabular-classification", "tiny/skops", text=csv_text)["data"]
    ]
    assert rows == ["setosa", "virginica"]


def test_chat_completions_reply_as_the_runtime_does(served):
    reply = served.client("tiny/llama-chat").chat_completion(
        messages=[{"role": "user", "content": "hello world"}]
    )
    assert (
        reply.choices[0].message.content
        == served.local("conversational", "tiny/llama-chat", text="hello world")["text"]
    )


def test_image_tasks_answer_what_the_runtime_answers(served):
    s = served
    photo = s.files / "photo.png"
    image = str(photo)
    labels = s.client("tiny/vit", "image-classification").image_classification(photo)
    assert [dict(x) for x in labels] == s.local("image-classification", "tiny/vit", image=image)["data"]
    found = s.client("tiny/detr", "object-detection").object_detection(photo, threshold=0.0)
    local = s.local("object-detection", "tiny/detr", image=image, threshold="0.0")["data"]
    assert local and [(d.label, d.score, dict(d.box)) for d in found] == [
        (d["label"], d["score"], d["box"]) for d in local
    ]
    segments = s.client("tiny/segformer", "image-segmentation").image_segmentation(photo)
    local = s.local("image-segmentation", "tiny/segformer", image=image, masks="png")
    assert [(x.label, x.score) for x in segments] == [(d["label"], d["score"]) for d in local["data"]]
    masks = local["image"][1:] if isinstance(local["image"], list) else []
    assert len(masks) == len(segments) > 0
    for got, want in zip(segments, masks, strict=True):
        assert np.array_equal(np.asarray(got.mask.convert("L")), np.asarray(Image.open(io.BytesIO(want))))
    caption = s.client("tiny/blip", "image-to-text").image_to_text(photo).generated_text
    assert caption == s.local("image-to-text", "tiny/blip", image=image)["text"]
    answers = s.client("tiny/blip-vqa", "visual-question-answering").visual_question_answering(
        photo, question="what is it ?"
    )
    assert (
        answers[0].answer
        == s.local("visual-question-answering", "tiny/blip-vqa", image=image, text="what is it ?")["text"]
    )
    answers = s.client("tiny/donut", "document-question-answering").document_question_answering(
        photo, question="what is the sky ?"
    )
    local = s.local("document-question-answering", "tiny/donut", image=image, text="what is the sky ?")
    assert answers[0].answer == local["text"]
    # depth-estimation has no InferenceClient method: the raw protocol, a PNG back
    status, depth = post(
        f"{s.url}/models/tiny/dpt/pipeline/depth-estimation", photo.read_bytes(), "image/png"
    )
    assert status == 200 and np.array_equal(
        pixels(depth), pixels(s.local("depth-estimation", "tiny/dpt", image=image)["image"])
    )


def test_diffusion_is_seeded_by_the_request_or_the_server(served):
    s, photo = served, str(served.files / "photo.png")
    drawn = s.client("tiny/sd", "text-to-image").text_to_image("a red cat", seed=7, num_inference_steps=2)
    local = s.local("text-to-image", "tiny/sd", seed=7, text="a red cat", steps="2")
    assert np.array_equal(pixels(drawn), pixels(local["image"]))
    other = s.local("text-to-image", "tiny/sd", seed=8, text="a red cat", steps="2")
    assert not np.array_equal(pixels(drawn), pixels(other["image"]))
    edited = s.client("tiny/sd", "image-to-image").image_to_image(
        photo, prompt="a blue dog", num_inference_steps=2
    )
    local = s.local(
        "image-to-image", "tiny/sd", image=photo, text="a blue dog", steps="2"
    )  # the server's seed
    assert edited.size == (32, 24) and np.array_equal(pixels(edited), pixels(local["image"]))
    edges = s.client("any-name", "canny-control").image_to_image(photo)  # no files needed
    assert np.array_equal(pixels(edges), pixels(s.local("canny-control", "any-name", image=photo)["image"]))


def test_audio_tasks_answer_what_the_runtime_answers(served):
    s = served
    tone = s.files / "tone.wav"
    speech = s.client("tiny/vits", "text-to-speech").text_to_speech("hello world")
    got, rate = samples(speech)
    want, want_rate = samples(s.local("text-to-speech", "tiny/vits", text="hello world")["audio"])
    assert rate == want_rate == 16000 and len(got) > 0 and np.array_equal(got, want)
    text = (
        s.client("tiny/wav2vec2-ctc", "automatic-speech-recognition").automatic_speech_recognition(tone).text
    )
    assert text == s.local("automatic-speech-recognition", "tiny/wav2vec2-ctc", audio=str(tone))["text"]
    labels = s.client("tiny/audio-cls", "audio-classification").audio_classification(tone)
    assert [dict(x) for x in labels] == s.local("audio-classification", "tiny/audio-cls", audio=str(tone))[
        "data"
    ]
    (converted,) = s.client("tiny/speecht5-vc", "audio-to-audio").audio_to_audio(tone)
    got, _ = samples(converted.blob)
    want, _ = samples(s.local("audio-to-audio", "tiny/speecht5-vc", audio=str(tone))["audio"])
    assert converted.content_type == "audio/wav" and len(got) > 0 and np.array_equal(got, want)


# ---- the listing, the declared task, refusals ------------------------------------------------------


def test_listing_shows_the_models_folder_and_what_is_resident(served):
    served.client("tiny/vit", "image-classification").image_classification(served.files / "photo.png")
    with urllib.request.urlopen(f"{served.url}/models", timeout=10) as r:
        listing = json.loads(r.read())
    assert {"tiny/vit", "tiny/sd", "tiny/vits"} <= {m["id"] for m in listing["models"]}
    assert (
        listing["hub"] is False and "text-to-image" in listing["tasks"] and listing["backend"] == "in-process"
    )
    assert {"id": "tiny/vit", "replica": "in-process"} in listing["resident"]
    with urllib.request.urlopen(f"{served.url}/health", timeout=10) as r:
        assert json.loads(r.read())["status"] == "ok"


def test_a_model_card_declares_the_task(served, tiny):
    tagged = served.root / "tagged" / "cls"
    tagged.mkdir(parents=True)
    for f in Path(tiny("bert-classifier")).iterdir():
        (tagged / f.name).symlink_to(f)
    (tagged / "README.md").write_text(
        "---\nlicense: mit\npipeline_tag: text-classification\n---\n# A classifier\n"
    )
    labels = served.client("tagged/cls").text_classification("a good cat")  # no /pipeline/<task>
    assert [x.label for x in labels] == [
        x.label
        for x in served.client("tiny/bert-cls", "text-classification").text_classification("a good cat")
    ]
    status, answer = post(f"{served.url}/models/tiny/bert-cls", b'{"inputs": "a good cat"}')
    assert status == 400 and "/pipeline/<task>" in answer["error"]


@pytest.mark.parametrize(
    "path,body,content_type,status,words",
    [
        (
            "tiny/nope/pipeline/text-classification",
            b'{"inputs": "x"}',
            "application/json",
            404,
            "not in this server",
        ),
        (
            "..%2F..%2Fetc/pipeline/text-classification",
            b'{"inputs": "x"}',
            "application/json",
            404,
            "not a model id",
        ),
        ("tiny/bert-cls/pipeline/no-such-task", b'{"inputs": "x"}', "application/json", 404, "no task"),
        ("tiny/bert-cls/pipeline/text-classification", b"{not json", "application/json", 400, "not JSON"),
        (
            "tiny/bert-cls/pipeline/text-classification",
            b'{"inputs": 3}',
            "application/json",
            400,
            "must be a string",
        ),
        ("tiny/vit/pipeline/image-classification", b"not an image", "image/png", 400, "could not be read"),
        (  # the question missing, and the inputs a bare string: a 400, not a crash
            "tiny/blip-vqa/pipeline/visual-question-answering",
            b'{"inputs": "aGVsbG8="}',
            "application/json",
            400,
            "question",
        ),
        ("tiny/vit/pipeline/image-classification", b'{"inputs": "%%%"}', "application/json", 400, "base64"),
        (
            "tiny/gpt2/pipeline/text-generation",
            b'{"inputs": "a", "stream": true}',
            "application/json",
            400,
            "stream",
        ),
        (
            "tiny/sd/pipeline/text-to-image",
            b'{"inputs": "a", "parameters": {"seed": "x"}}',
            "application/json",
            400,
            "seed",
        ),
    ],
)
def test_bad_requests_get_clear_errors(served, path, body, content_type, status, words):
    got, answer = post(f"{served.url}/models/{path}", body, content_type)
    assert got == status and words in answer["error"], answer


def test_the_body_size_is_bounded(served):
    app = create_app(served.backend, ModelTable(served.root, hub=False), max_body_bytes=1000)
    with protocol_server(app) as url:
        status, answer = post(
            f"{url}/models/tiny/vit/pipeline/image-classification", b"x" * 5000, "image/png"
        )
    assert status == 413 and "limit" in answer["error"]


# ---- a client that goes away stops its call ---------------------------------------------------------


def test_a_disconnected_client_stops_the_running_call(served, monkeypatch):
    from huggingface_hub.errors import InferenceTimeoutError

    monkeypatch.setattr(diffusion, "STEPS", 900)  # long work if nothing stops it
    served.client("tiny/sd", "text-to-image").text_to_image("warm up", num_inference_steps=2)
    before = len(served.backend.replies)
    start = time.monotonic()
    with pytest.raises(InferenceTimeoutError):
        served.client("tiny/sd", "text-to-image", timeout=1.5).text_to_image("a very slow cat")
    while len(served.backend.replies) == before and time.monotonic() - start < 30:
        time.sleep(0.05)
    reply, took = served.backend.replies[-1]
    assert reply.status == 499 and "went away" in reply.error
    assert took < 10, f"the call ran {took:.1f} s after its client left"
    # the model is free again at once
    again = served.client("tiny/sd", "text-to-image").text_to_image("a cat", num_inference_steps=2)
    assert again.size == (32, 32)
