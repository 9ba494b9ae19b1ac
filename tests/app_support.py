"""Shared by test_app.py and test_browser.py: a fake LLM that plans from what it is sent, tiny real
models in a catalog, and the app launched in-process on 127.0.0.1."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fakes.llm_server import FakeLLMServer, Reply
from tiny_vision import draw_photo

from hugginggpt.catalog import Catalog, ModelCard
from hugginggpt.config import Settings

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def plan_for(request: str) -> dict[str, Any]:
    """The plan a good controller would make: caption the attached image, then draw the caption and
    read it aloud. Requests that mention 'two captions' caption twice (a second model choice)."""
    names = re.findall(r"- image: (\S+) \(attached to this message\)", request)
    if not names:
        return {"tasks": []}
    return {
        "tasks": [
            {"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": names[0]}},
            {"task": "text-to-image", "id": 1, "dep": [0], "args": {"text": "<resource>-0"}},
            {"task": "text-to-speech", "id": 2, "dep": [0], "args": {"text": "<resource>-0"}},
        ]
    }


def responder(stage: str, body: dict[str, Any]) -> Reply | str:
    """Answers each stage from the request itself, so concurrent conversations get their own replies."""
    last = body["messages"][-1]["content"]
    if stage == "plan":
        if "That plan cannot run" in last:  # a correction: plan the request it corrects
            asked = [m["content"] for m in body["messages"] if m["role"] == "user"]
            request = next(m for m in reversed(asked) if "attached to this message" in m)
            return Reply(json.dumps(plan_for(request)), delay=0.05)
        if "[reject-once]" in last:  # a first plan naming a file that is not there
            bad = {
                "tasks": [{"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": "nothere.png"}}]
            }
            return Reply(json.dumps(bad), delay=0.05)
        return Reply(json.dumps(plan_for(last)), delay=0.05)
    if stage == "select":
        picks = {
            m: {"id": cand, "reason": f"{cand} is small and runs locally"}
            for m, cand in re.findall(r'Task (\d+) \(image-to-text\).*?"([^"]+)"', last, re.DOTALL)
        }
        return json.dumps(picks)
    if stage == "respond":
        request = re.search(r"Request: (.*)", last).group(1)
        files = re.findall(r"(outputs/\S+\.(?:png|wav))", last)
        tag = re.search(r"\[(conv-\w+)\]", request)
        # markdown images and anything after "ECHO:" come back, as from a prompt-injected LLM
        injected = " ".join(re.findall(r"!\[[^\]]*\]\([^)]*\)", request))
        echo = request.split("ECHO:", 1)[1] if "ECHO:" in request else ""
        return Reply(
            f"Answer for {tag.group(1) if tag else 'you'}: I captioned your image, drew the caption "
            f"and read it aloud. Files: {', '.join(files)}. {injected}{echo}".rstrip(),
            chunk_delay=0.01,
        )
    return Reply("unexpected stage", status=500)


@pytest.fixture(scope="session")
def llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        server.responder = responder
        yield server


@pytest.fixture(scope="session")
def tiny_catalog(tiny, tiny_blip, tiny_sd) -> Catalog:
    """Real tiny random-weight models (BLIP captioner, Stable Diffusion, VITS), run by the local endpoint;
    the session's own builds, each made under a fixed seed, so the same captions on every run."""
    blip, sd, tts = tiny_blip, tiny_sd, tiny("vits")
    return Catalog(
        [
            ModelCard(id="tiny/blip-base", task="image-to-text", path=blip, local=True, downloads=900),
            ModelCard(id="tiny/blip-large", task="image-to-text", path=blip, local=True, downloads=500),
            ModelCard(id="tiny/stable-diffusion", task="text-to-image", path=sd, local=True, downloads=800),
            ModelCard(id="tiny/vits", task="text-to-speech", path=tts, local=True, downloads=700),
        ]
    )


def app_settings(server: FakeLLMServer, workdir: Path, **more: Any) -> Settings:
    return Settings(
        llm_base_url=server.url,
        llm_model="fake-controller",
        llm_api_key="sk-test-not-a-key",
        llm_timeout=20,
        llm_max_retries=0,
        inference="local",
        workdir=str(workdir),
        **more,
    )


@contextmanager
def running_app(settings: Settings, *, port: int | None = None, **kwargs: Any) -> Iterator[Any]:
    """The app on 127.0.0.1 at `port` (None: a free one); yields the Blocks (demo.local_url is its
    address)."""
    import app

    demo = app.build_demo(settings, **kwargs)
    demo.queue().launch(
        server_name="127.0.0.1",
        server_port=port,
        prevent_thread_lock=True,
        quiet=True,
        **app.launch_options(demo.chat_app.max_upload_bytes, demo=demo),
    )
    try:
        yield demo
    finally:
        demo.close()


def photo(path: Path, size: tuple[int, int] = (48, 40)) -> Path:
    draw_photo(path, size)
    return path


def fake_catalog() -> Catalog:
    """Two captioners (a real choice), a painter and a speaker, for the scripted fake endpoint."""
    from fakes.endpoints import cards

    return Catalog(
        cards(
            ("org/captioner-a", "image-to-text", 9),
            ("org/captioner-b", "image-to-text", 5),
            ("org/painter", "text-to-image", 3),
            ("org/speaker", "text-to-speech", 2),
        )
    )
