"""The controller's side of the expert server: the hosted endpoint at a model URL on it, and the
remote endpoint (experts_url) that sends every model the server offers there, under HF_HUB_OFFLINE
as the whole suite runs. Results must equal the in-process runtime's for the same models."""

from __future__ import annotations

import io
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from fakes.hf_inference_server import loopback_only
from PIL import Image
from serve_support import free_port

from hugginggpt.catalog import ModelCard
from hugginggpt.config import Settings, load_settings
from hugginggpt.endpoints import (
    Call,
    EndpointError,
    HostedEndpoint,
    LocalEndpoint,
    ModelUnavailable,
    RemoteEndpoint,
    Stopped,
    build_endpoint,
)
from models_local.handlers import diffusion


def pixels(path: Path | bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(path) if isinstance(path, bytes) else path)
    return np.asarray(image.convert("RGB"))


def by_kind(artifacts) -> dict:
    return {a.kind: (a.path if a.path is not None else a.value) for a in artifacts}


@pytest.fixture
def remote(served) -> RemoteEndpoint:
    return RemoteEndpoint(served.url, timeout=60)


def test_the_hosted_endpoint_at_a_model_url_gets_what_the_runtime_makes(served, tmp_path):
    photo, tone = served.files / "photo.png", served.files / "tone.wav"
    hosted = HostedEndpoint(timeout=60)

    def card(model: str, task: str) -> ModelCard:
        return ModelCard(id=model, task=task, endpoint_url=f"{served.url}/models/{model}/pipeline/{task}")

    with loopback_only():
        labels = by_kind(
            hosted.run(
                "image-classification",
                card("tiny/vit", "image-classification"),
                {"image": photo},
                Call(out_dir=tmp_path),
            ).outputs
        )
        speech = by_kind(
            hosted.run(
                "text-to-speech",
                card("tiny/vits", "text-to-speech"),
                {"text": "hello world"},
                Call(out_dir=tmp_path),
            ).outputs
        )
        heard = by_kind(
            hosted.run(
                "automatic-speech-recognition",
                card("tiny/wav2vec2-ctc", "automatic-speech-recognition"),
                {"audio": tone},
                Call(out_dir=tmp_path),
            ).outputs
        )
    assert labels["data"] == served.local("image-classification", "tiny/vit", image=str(photo))["data"]
    got, rate = sf.read(speech["audio"], dtype="float32")
    want, want_rate = sf.read(
        io.BytesIO(served.local("text-to-speech", "tiny/vits", text="hello world")["audio"]), dtype="float32"
    )
    assert rate == want_rate and np.array_equal(got, want)
    assert (
        heard["text"]
        == served.local("automatic-speech-recognition", "tiny/wav2vec2-ctc", audio=str(tone))["text"]
    )


def test_the_remote_endpoint_runs_what_the_server_offers_even_offline(served, remote, tmp_path):
    photo = served.files / "photo.png"
    offered = {
        ("tiny/vit", "image-classification"): True,
        ("tiny/sd", "text-to-image"): True,
        ("tiny/not-there", "image-classification"): False,  # not in its models folder, and no hub
        ("tiny/dpt", "depth-estimation"): False,  # no protocol call the hosted path can make
    }
    for (model, task), expected in offered.items():
        assert remote.can_run(ModelCard(id=model, task=task)) is expected, (model, task)
    drawn = by_kind(
        remote.run(
            "text-to-image",
            ModelCard(id="tiny/sd", task="text-to-image"),
            {"text": "a red cat"},
            Call(out_dir=tmp_path),
        ).outputs
    )
    want = served.local("text-to-image", "tiny/sd", text="a red cat")  # the server's seed, 25 steps
    assert np.array_equal(pixels(drawn["image"]), pixels(want["image"]))
    found = by_kind(
        remote.run(
            "object-detection",
            ModelCard(id="tiny/detr", task="object-detection"),
            {"image": photo},
            Call(out_dir=tmp_path),
        ).outputs
    )
    assert found["data"] == served.local("object-detection", "tiny/detr", image=str(photo))["data"]
    assert remote.describe() == f"remote (the expert server at {served.url})"
    assert remote.hosted.token is None  # the HF token never goes to an expert server


def test_offline_mode_still_refuses_every_other_host(served, remote, tmp_path):
    other = f"http://localhost:{served.url.rsplit(':', 1)[1]}"  # the same server by another name
    card = ModelCard(
        id="tiny/vit",
        task="image-classification",
        endpoint_url=f"{other}/models/tiny/vit/pipeline/image-classification",
    )
    with pytest.raises(ModelUnavailable, match="HF_HUB_OFFLINE"):
        HostedEndpoint(timeout=10).run(
            "image-classification", card, {"image": served.files / "photo.png"}, Call(out_dir=tmp_path)
        )


def test_the_server_is_asked_once_what_it_serves(served, monkeypatch):
    asked = []
    real = urllib.request.urlopen
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, **kw: asked.append(url) or real(url, **kw))
    remote = RemoteEndpoint(served.url)
    for _ in range(3):
        assert remote.can_run(ModelCard(id="tiny/vit", task="image-classification"))
        assert not remote.can_run(ModelCard(id="tiny/nope", task="image-classification"))
    assert asked == [f"{served.url}/models"]


def test_an_unreachable_server_offers_nothing_and_says_why(served, tmp_path, caplog):
    remote = RemoteEndpoint(f"http://127.0.0.1:{free_port()}", timeout=5)
    card = ModelCard(id="tiny/vit", task="image-classification")
    assert remote.can_run(card) is False
    assert "cannot say what it serves" in caplog.text
    with pytest.raises(EndpointError, match="refused"):
        remote.run(
            "image-classification", card, {"image": served.files / "photo.png"}, Call(out_dir=tmp_path)
        )


def test_stop_closes_the_call_and_the_server_stops_the_model(served, remote, monkeypatch, tmp_path):
    monkeypatch.setattr(diffusion, "STEPS", 900)  # long work if nothing stops it
    before = len(served.backend.replies)
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    start = time.monotonic()
    with pytest.raises(Stopped):
        remote.run(
            "text-to-image",
            ModelCard(id="tiny/sd", task="text-to-image"),
            {"text": "a slow cat"},
            Call(out_dir=tmp_path, stop=stop),
        )
    assert time.monotonic() - start < 5
    while len(served.backend.replies) == before and time.monotonic() - start < 30:
        time.sleep(0.05)
    reply, took = served.backend.replies[-1]
    assert reply.status == 499 and took < 10  # the server saw its client leave and stopped the model


# ---- the setting and the inference modes ------------------------------------------------------------


def test_experts_url_makes_mode_remote_and_leads_hybrid(served):
    settings = load_settings(environ={"HUGGINGGPT_EXPERTS_URL": served.url, "HUGGINGGPT_INFERENCE": "remote"})
    assert settings.experts_url == served.url and settings.inference == "remote"
    assert [type(b) for b in build_endpoint("remote", experts_url=served.url).backends] == [RemoteEndpoint]
    hybrid = build_endpoint("hybrid", experts_url=served.url)
    assert [type(b) for b in hybrid.backends] == [RemoteEndpoint, LocalEndpoint, HostedEndpoint]
    assert [type(b) for b in build_endpoint("hybrid").backends] == [LocalEndpoint, HostedEndpoint]
    with pytest.raises(ValueError, match="experts_url"):
        Settings(inference="remote")
    with pytest.raises(ValueError, match="http"):
        Settings(experts_url="ftp://example.org")


def test_hybrid_falls_back_to_this_process_for_a_model_the_server_lacks(served, tiny_vit, tmp_path):
    hybrid = build_endpoint("hybrid", experts_url=served.url)
    before = len(served.backend.replies)
    card = ModelCard(id="tiny/mine", task="image-classification", path=tiny_vit, local=True)
    got = by_kind(
        hybrid.run(
            "image-classification", card, {"image": served.files / "photo.png"}, Call(out_dir=tmp_path)
        ).outputs
    )
    assert len(served.backend.replies) == before  # the server was not asked
    assert (
        got["data"]
        == served.local("image-classification", "tiny/vit", image=str(served.files / "photo.png"))["data"]
    )
