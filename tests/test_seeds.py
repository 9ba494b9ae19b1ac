"""Seeds: every sampling task gets one, it reaches the model, and the same seed gives the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.endpoints import FakeEndpoint, cards
from fakes.hf_inference_server import FakeHFServer, loopback_only
from fakes.llm_server import FakeLLMServer

import models_local
from hugginggpt.catalog import Catalog, ModelCard
from hugginggpt.endpoints import Call, HostedEndpoint
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.run.pipeline import Pipeline
from hugginggpt.run.seeds import derived_seed
from hugginggpt.stages.plan import parse_plan
from models_local.handlers import diffusion


@pytest.fixture
def few_steps(monkeypatch):
    monkeypatch.setattr(diffusion, "STEPS", 2)


def png_bytes(artifacts: list[dict]) -> bytes:
    (image,) = artifacts
    return Path(image["path"]).read_bytes()


def test_the_same_seed_gives_byte_identical_pngs_and_another_seed_another_image(tiny_sd, few_steps, tmp_path):
    def draw(seed: str, folder: str) -> bytes:
        return png_bytes(
            models_local.run("text-to-image", tiny_sd, {"text": "a cat", "seed": seed}, tmp_path / folder)
        )

    first = draw("7", "a")
    assert draw("7", "b") == first
    assert draw("8", "c") != first


def test_seeds_reach_image_to_image_and_controlnet(tiny_sd, tiny_sd_controlnet, few_steps, tmp_path):
    from tiny_vision import draw_photo

    photo = draw_photo(tmp_path / "photo.png")
    for task, model in (("image-to-image", tiny_sd), ("canny-text-to-image", tiny_sd_controlnet)):
        inputs = {"image": photo, "text": "a dog"}
        runs = [
            png_bytes(models_local.run(task, model, {**inputs, "seed": seed}, tmp_path / f"{task}{i}"))
            for i, seed in enumerate(("1", "1", "2"))
        ]
        assert runs[0] == runs[1] and runs[0] != runs[2], task


def test_a_seed_makes_vits_speech_repeatable(tiny, tmp_path):
    def speak(seed: str, folder: str) -> bytes:
        (audio,) = models_local.run(
            "text-to-speech", tiny("vits"), {"text": "hello", "seed": seed}, tmp_path / folder
        )
        return Path(audio["path"]).read_bytes()

    assert speak("3", "a") == speak("3", "b")
    assert speak("3", "a") != speak("4", "c")


def test_sampling_tasks_get_a_seed_that_is_recorded_and_reaches_the_endpoint(tmp_path):
    plan = [
        {"task": "text-to-image", "id": 0, "dep": [-1], "args": {"text": "a cat"}},
        {"task": "text-to-image", "id": 1, "dep": [-1], "args": {"text": "a cat"}},
        {"task": "image-classification", "id": 2, "dep": [0], "args": {"image": "<resource>-0"}},
    ]
    catalog = Catalog(cards(("draw", "text-to-image", 1), ("label", "image-classification", 1)))
    endpoint = FakeEndpoint()
    with FakeLLMServer() as server:
        server.script("plan", json.dumps(plan)).script("respond", "ok")
        llm = OpenAICompatibleLLM(base_url=server.url, model="f", api_key="k", timeout=5, max_retries=0)
        done = list(
            Pipeline(llm=llm, catalog=catalog, endpoint=endpoint).run(
                "two cats", workspace=Workspace(tmp_path)
            )
        )[-1]
    seeds = {r.id: r.seed for r in done.records}
    expected = {t.id: derived_seed(0, t) for t in parse_plan(json.dumps(plan)).tasks[:2]}
    assert seeds == {**expected, 2: None}
    assert seeds[0] != seeds[1]  # two identical tasks still draw two different images
    assert {call[2].get("seed") for call in endpoint.calls} == {seeds[0], seeds[1], None}
    assert [t["seed"] for t in done.trace["tasks"]] == [seeds[0], seeds[1], None]
    assert done.trace["choices"]["0"]["seed"] == seeds[0]


def test_hosted_text_to_image_sends_the_seed(tmp_path):
    with FakeHFServer() as hf, loopback_only():
        card = ModelCard(id="acme/draw", task="text-to-image", endpoint_url=hf.url_for("text-to-image"))
        HostedEndpoint(timeout=5).run(
            "text-to-image", card, {"text": "a cat", "seed": 42}, Call(out_dir=tmp_path)
        )
        (request,) = hf.calls("text-to-image")
    assert request.json()["parameters"]["seed"] == 42
