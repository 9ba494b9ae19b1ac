"""HostedEndpoint: the real InferenceClient against a fake HF inference server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from fakes.hf_inference_server import FakeHFServer, Fault, loopback_only
from PIL import Image

from hugginggpt.catalog import ModelCard
from hugginggpt.endpoints import (
    Call,
    Credentials,
    EndpointError,
    HostedEndpoint,
    ModelUnavailable,
    build_endpoint,
)
from hugginggpt.files.artifacts import Artifact
from hugginggpt.tasks import TASKS


@pytest.fixture
def online():
    with loopback_only():
        yield


@pytest.fixture(scope="module")
def hf():
    with FakeHFServer() as server:
        yield server


@pytest.fixture
def files(tmp_path) -> dict[str, Path]:
    image = tmp_path / "photo.png"
    Image.new("RGB", (40, 30), (10, 120, 60)).save(image)
    audio = tmp_path / "speech.wav"
    sf.write(audio, np.zeros(8000, dtype="float32"), 16000)
    return {"image": image, "audio": audio}


def card(hf: FakeHFServer, task: str, **kw) -> ModelCard:
    return ModelCard(id=f"acme/{task}-model", task=task, endpoint_url=hf.url_for(task), **kw)


def fast(**kw) -> HostedEndpoint:
    return HostedEndpoint(**{"timeout": 5.0, "backoff": 0.01, "retries": 2, **kw})


def inputs_for(task: str, files: dict[str, Path]) -> dict:
    if task == "tabular-classification":
        return {"text": "age,income\n31,high\n45,low\n22,mid"}
    values = {"text": "hello big world", "context": "Paris is in France", "text2": "big world", **files}
    return {a.name: values[a.name] for a in TASKS[task].args}


def assert_files_decode(artifacts: list[Artifact], out_dir: Path) -> None:
    for art in artifacts:
        if art.path is None:
            continue
        assert art.path.parent == out_dir and art.path.stat().st_size > 0
        if art.kind == "image":
            with Image.open(art.path) as im:
                assert im.format == "PNG"
        elif art.kind == "audio":
            assert art.path.suffix == ".wav" and sf.info(str(art.path)).format == "WAV"


# --- tasks -------------------------------------------------------------------------------------


def test_object_detection_gives_boxes_an_annotated_png_and_a_summary(online, hf, files, tmp_path):
    out = tmp_path / "out"
    arts = (
        fast()
        .run("object-detection", card(hf, "object-detection"), {"image": files["image"]}, Call(out_dir=out))
        .outputs
    )

    by_kind = {a.kind: a for a in arts}
    assert set(by_kind) == {"image", "text", "data"}
    boxes = by_kind["data"].value
    assert [b["label"] for b in boxes] == ["cat", "dog"]
    assert boxes[0]["box"] == {"xmin": 1.0, "ymin": 1.0, "xmax": 20.0, "ymax": 15.0}  # from the 40x30 input
    assert "cat (0.98)" in by_kind["text"].value
    with Image.open(by_kind["image"].path) as annotated:
        assert annotated.format == "PNG" and annotated.size == (40, 30)
        assert annotated.getpixel((1, 5)) == (255, 0, 0)  # the box outline was drawn
    json.dumps(by_kind["data"].value)  # data artifacts stay JSON-serialisable
    # The image went as a binary body, the way the HF inference protocol takes it.
    request = hf.calls("object-detection")[-1]
    assert request.headers["content-type"].startswith("image/")
    assert request.body == files["image"].read_bytes()


def test_image_classification_labels_come_from_the_sent_image(online, hf, files, tmp_path):
    arts = (
        fast()
        .run(
            "image-classification",
            card(hf, "image-classification"),
            {"image": files["image"]},
            Call(out_dir=tmp_path),
        )
        .outputs
    )
    text, data = arts
    assert text.kind == "text" and text.value.startswith("40x30 (0.90)")
    assert data.kind == "data" and data.value[0] == {"label": "40x30", "score": 0.9}


def test_speech_recognition_sends_the_audio_file(online, hf, files, tmp_path):
    arts = (
        fast()
        .run(
            "automatic-speech-recognition",
            card(hf, "automatic-speech-recognition"),
            {"audio": files["audio"]},
            Call(out_dir=tmp_path),
        )
        .outputs
    )
    assert arts == [Artifact("text", value="8000 samples at 16000 Hz")]


def test_text_to_speech_is_saved_as_wav(online, hf, tmp_path):
    arts = (
        fast()
        .run(
            "text-to-speech", card(hf, "text-to-speech"), {"text": "read this aloud"}, Call(out_dir=tmp_path)
        )
        .outputs
    )
    [audio] = arts
    assert audio.kind == "audio" and audio.path.suffix == ".wav"
    samples, rate = sf.read(audio.path)  # the server sent FLAC; we keep WAV
    assert sf.info(str(audio.path)).format == "WAV" and rate == 16000 and len(samples) == 4800


def test_summarization_sends_json_inputs(online, hf, tmp_path):
    text = "the cat sat on the mat all day long"
    arts = (
        fast().run("summarization", card(hf, "summarization"), {"text": text}, Call(out_dir=tmp_path)).outputs
    )
    assert arts == [Artifact("text", value="the cat sat")]
    assert hf.calls("summarization")[-1].json()["inputs"] == text


def test_conversational_uses_chat_completions_at_the_url(online, hf, tmp_path):
    arts = (
        fast()
        .run("conversational", card(hf, "conversational"), {"text": "hi there"}, Call(out_dir=tmp_path))
        .outputs
    )
    assert arts == [Artifact("text", value="you said: hi there")]
    assert hf.calls("conversational")[-1].path == "/conversational/model/v1/chat/completions"


HOSTED_TASKS = [t for t in TASKS if t not in ("depth-estimation", "text-to-video")]


@pytest.mark.parametrize("task", HOSTED_TASKS)
def test_every_hosted_task_gives_the_kinds_its_spec_lists(online, hf, files, tmp_path, task):
    model = card(hf, task)
    endpoint = fast()
    assert endpoint.can_run(model)
    out = tmp_path / "out"
    arts = endpoint.run(task, model, inputs_for(task, files), Call(out_dir=out)).outputs
    assert set(TASKS[task].outputs) <= {a.kind for a in arts}
    assert_files_decode(arts, out)


# --- which models it offers to run ---------------------------------------------------------------


def test_can_run_for_urls_and_folders(online, hf):
    endpoint = fast()
    assert not endpoint.can_run(card(hf, "depth-estimation"))  # InferenceClient has no method for it
    assert not endpoint.can_run(card(hf, "text-to-video"))  # hf-inference protocol has no such task
    assert not endpoint.can_run(ModelCard(id="acme/canny", task="canny-text-to-image"))  # no method
    assert endpoint.can_run(card(hf, "canny-text-to-image"))  # its own server speaks image-to-image
    assert not endpoint.can_run(ModelCard(id="mine", task="summarization", path="/models/mine"))  # local only


def test_offline_mode_refuses_without_a_request(hf, tmp_path):
    before = len(hf.requests)
    model = card(hf, "summarization")
    assert not fast().can_run(model)
    with pytest.raises(ModelUnavailable, match="HF_HUB_OFFLINE"):
        fast().run("summarization", model, {"text": "a b c"}, Call(out_dir=tmp_path))
    assert len(hf.requests) == before


# --- errors --------------------------------------------------------------------------------------


def test_loading_503_is_retried_then_succeeds(online, hf, tmp_path):
    model = card(hf, "summarization")
    before = len(hf.calls("summarization"))
    hf.fail("summarization", Fault(503), Fault(503, body={"error": "loading", "estimated_time": 0.05}))
    arts = fast().run("summarization", model, {"text": "one two three four"}, Call(out_dir=tmp_path)).outputs
    assert arts == [Artifact("text", value="one two three")]
    assert len(hf.calls("summarization")) - before == 3


def test_loading_503_gives_up_with_a_clear_message(online, hf, tmp_path):
    before = len(hf.calls("summarization"))
    hf.fail("summarization", *[Fault(503)] * 3)
    with pytest.raises(EndpointError) as err:
        fast(retries=2).run(
            "summarization", card(hf, "summarization"), {"text": "a b c"}, Call(out_dir=tmp_path)
        )
    assert not isinstance(err.value, ModelUnavailable)
    assert "acme/summarization-model" in str(err.value) and "loading (HTTP 503)" in str(err.value)
    assert "3 tries" in str(err.value) and len(hf.calls("summarization")) - before == 3


def test_a_stop_ends_the_retries(online, hf, tmp_path):
    before = len(hf.calls("summarization"))
    hf.fail("summarization", Fault(503))  # the only fault: a retry would succeed
    stop = threading.Event()
    stop.set()  # pressed while the first try was answered "loading"
    with pytest.raises(EndpointError, match="acme/summarization-model.*: stopped"):
        fast(retries=2).run(
            "summarization", card(hf, "summarization"), {"text": "a b c"}, Call(out_dir=tmp_path, stop=stop)
        )
    assert len(hf.calls("summarization")) - before == 1  # no second try


def test_rate_limit_429_retries_within_bounds(online, hf, tmp_path):
    # The server asks for 100 s; the wait is capped by max_wait, so this stays fast.
    hf.fail("translation", Fault(429, headers={"Retry-After": "100"}), *[Fault(429)] * 2)
    start = time.monotonic()
    with pytest.raises(EndpointError, match=r"acme/translation-model.*rate limited \(HTTP 429\)"):
        fast(retries=2, max_wait=0.05).run(
            "translation", card(hf, "translation"), {"text": "a b"}, Call(out_dir=tmp_path)
        )
    assert time.monotonic() - start < 2
    # One 429, then the server answers: the retry succeeds.
    hf.fail("translation", Fault(429, headers={"Retry-After": "0"}))
    assert (
        fast()
        .run("translation", card(hf, "translation"), {"text": "a b"}, Call(out_dir=tmp_path))
        .outputs[0]
        .value
        == "b a"
    )


def test_time_out_is_reported_with_the_model_and_limit(online, hf, tmp_path):
    hf.fail("text-generation", Fault(200, delay=2.0))
    start = time.monotonic()
    with pytest.raises(EndpointError, match=r"acme/text-generation-model.*within 0.3 s \(time-out\)"):
        fast(timeout=0.3).run(
            "text-generation", card(hf, "text-generation"), {"text": "go"}, Call(out_dir=tmp_path)
        )
    assert time.monotonic() - start < 1.5


def test_other_http_errors(online, hf, tmp_path):
    model = card(hf, "text-classification")
    hf.fail("text-classification", Fault(500, body={"error": "CUDA out of memory"}))
    with pytest.raises(EndpointError, match="HTTP 500: CUDA out of memory") as err:
        fast().run("text-classification", model, {"text": "x"}, Call(out_dir=tmp_path))
    assert not isinstance(err.value, ModelUnavailable)
    hf.fail("text-classification", Fault(404, body={"error": "Model not found"}))
    with pytest.raises(ModelUnavailable, match="HTTP 404"):
        fast().run("text-classification", model, {"text": "x"}, Call(out_dir=tmp_path))
    # The server checks inputs like a real one: a file that is no image is refused.
    not_image = tmp_path / "note.png"
    not_image.write_text("not an image")
    with pytest.raises(EndpointError, match="HTTP 400"):
        fast().run(
            "image-classification",
            card(hf, "image-classification"),
            {"image": not_image},
            Call(out_dir=tmp_path),
        )


def test_requests_beyond_loopback_are_refused_by_the_test_guard(online, tmp_path):
    model = ModelCard(id="acme/far", task="summarization", endpoint_url="http://10.0.0.1/far")
    with pytest.raises(EndpointError, match="test guard"):
        fast().run("summarization", model, {"text": "a b"}, Call(out_dir=tmp_path))


def test_unreachable_server(online, tmp_path):
    model = ModelCard(id="acme/gone", task="summarization", endpoint_url="http://127.0.0.1:9/gone")
    with pytest.raises(EndpointError, match="acme/gone.*the server refused the connection"):
        fast().run("summarization", model, {"text": "a b"}, Call(out_dir=tmp_path))


# --- the token -----------------------------------------------------------------------------------


@pytest.fixture
def hf_is_the_hub(hf, monkeypatch):
    """The fake server's origin as HF_ENDPOINT: Hugging Face's own host, where the token may go."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", hf.base)


def test_token_goes_only_to_hugging_face(online, hf, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    model = card(hf, "summarization")
    fast().run("summarization", model, {"text": "a b"}, Call(out_dir=tmp_path))
    assert "authorization" not in hf.calls("summarization")[-1].headers  # any URL could be in a card
    fast(token="hf_argument").run("summarization", model, {"text": "a b"}, Call(out_dir=tmp_path))
    assert "authorization" not in hf.calls("summarization")[-1].headers
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", hf.base)  # now it is the Hub
    fast(token="hf_argument").run("summarization", model, {"text": "a b"}, Call(out_dir=tmp_path))
    assert hf.calls("summarization")[-1].headers["authorization"] == "Bearer hf_argument"


def test_a_visitors_token_in_the_call_pays_for_the_call_and_the_deadline_bounds_it(
    online, hf, hf_is_the_hub, tmp_path
):
    hosted, model = fast(token="hf_server"), card(hf, "summarization")
    visitor = Call(out_dir=tmp_path, credentials=Credentials(hf_token="hf_visitor\n"))
    hosted.run("summarization", model, {"text": "a b"}, visitor)
    assert hf.calls("summarization")[-1].headers["authorization"] == "Bearer hf_visitor"
    hosted.run("summarization", model, {"text": "a b"}, Call(out_dir=tmp_path))
    assert hf.calls("summarization")[-1].headers["authorization"] == "Bearer hf_server"
    hf.fail("summarization", Fault(200, delay=3.0))  # the task's deadline, not the endpoint's 5 s
    start, near = time.monotonic(), Call(out_dir=tmp_path, deadline=time.monotonic() + 0.5)
    with pytest.raises(EndpointError, match=r"within 0.\d+ s \(time-out\)"):
        hosted.run("summarization", model, {"text": "a b"}, near)
    assert time.monotonic() - start < 2.5


def test_build_endpoint_passes_settings_to_hosted(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_env")
    [hosted] = build_endpoint("hosted", provider="hf-inference", timeout=7).backends
    assert isinstance(hosted, HostedEndpoint)
    assert (hosted.token, hosted.provider, hosted.timeout) == ("hf_env", "hf-inference", 7)
    [hosted] = build_endpoint("hosted", hf_token="hf_arg").backends
    assert hosted.token == "hf_arg" and hosted.provider == "auto"


def test_a_token_with_its_line_ending_is_sent_clean(online, hf, hf_is_the_hub, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", "hf_from_a_windows_env_file\r\n")
    fast().run("summarization", card(hf, "summarization"), {"text": "a b"}, Call(out_dir=tmp_path))
    assert hf.calls("summarization")[-1].headers["authorization"] == "Bearer hf_from_a_windows_env_file"


def test_errors_never_quote_the_token(online, hf, hf_is_the_hub, tmp_path):
    """The HTTP library refuses a header with a line break inside, quoting the whole header value;
    that message reaches the chat, the trace and the LLM."""
    secret = "hf_" + "Q" * 20 + "\n" + "Z" * 14
    with pytest.raises(EndpointError) as err:
        fast(token=secret).run(
            "summarization", card(hf, "summarization"), {"text": "a b"}, Call(out_dir=tmp_path)
        )
    assert "QQQQ" not in str(err.value) and "ZZZZ" not in str(err.value)
    assert "acme/summarization-model" in str(err.value)  # still says which model failed


def test_retries_are_logged_with_their_wait(online, hf, tmp_path, caplog):
    hf.fail("summarization", Fault(503, body={"error": "loading", "estimated_time": 0.02}))
    with caplog.at_level("INFO", logger="hugginggpt.endpoints.hosted"):
        fast(retries=2).run(
            "summarization", card(hf, "summarization"), {"text": "one two"}, Call(out_dir=tmp_path)
        )
    [record] = [r for r in caplog.records if r.name == "hugginggpt.endpoints.hosted"]
    assert record.levelname == "INFO"
    assert record.getMessage() == (
        f"acme/summarization-model at {hf.url_for('summarization')}: "
        "the model is still loading (HTTP 503); retry 1 of 2 in 0.02 s"
    )
