"""LLM time limits are wall-clock deadlines kept from outside the read: a server that trickles its
reply one byte at a time (so that no read ever times out and no piece is ever whole) is hung up at
the deadline, and whoever waited moves on. The real openai client against the fake LLM server."""

from __future__ import annotations

import io
import json
import threading
import time
from typing import Any

import pytest
from fakes.llm_server import FakeLLMServer, Reply

from hugginggpt.commands.cli import main
from hugginggpt.llms.interface import LLMError, LLMLimits
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM

TRICKLE = Reply('{"tasks": []}', trickle=0.2)  # about 500 bytes: 100 s to the end


@pytest.fixture
def trickler():
    with FakeLLMServer() as server:
        server.script("*", TRICKLE)
        yield server


def llm(server: FakeLLMServer, seconds: float) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(
        base_url=server.url, api_key="sk-x", max_retries=0, timeout=30, limits=LLMLimits(max_seconds=seconds)
    )


def test_a_trickled_reply_ends_at_the_call_deadline_and_its_connection_is_closed(trickler):
    client = llm(trickler, 1.0)
    started = time.monotonic()
    with pytest.raises(LLMError, match="did not finish its reply within 1 s"):
        client.complete([{"role": "user", "content": "hi"}], stage="plan")
    assert time.monotonic() - started < 1.5
    deadline = time.monotonic() + 2
    while not trickler.hung_up_at and time.monotonic() < deadline:
        time.sleep(0.02)
    assert trickler.hung_up_at and trickler.hung_up_at[0] - started < 1.0 + 0.6  # the server saw it go


def test_a_stop_ends_the_call_in_flight(trickler):
    stop = threading.Event()
    view = llm(trickler, 60.0).recording(stop=stop)
    threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    completion = view.complete([{"role": "user", "content": "hi"}], stage="plan")
    assert completion.cut == "the run was stopped" and completion.text == ""
    assert time.monotonic() - started < 1.0


def run_cli(server: FakeLLMServer, tmp_path, monkeypatch, **limits: float) -> tuple[int, str, float]:
    for name, value in limits.items():
        monkeypatch.setenv(f"HUGGINGGPT_{name.upper()}", str(value))
    out, err = io.StringIO(), io.StringIO()
    flags = ["--llm-base-url", server.url, "--llm-api-key", "sk-x", "--inference", "local"]
    started = time.monotonic()
    code = main([*flags, "--workdir", str(tmp_path / "ws"), "--json", "draw a cat"], stdout=out, stderr=err)
    return code, out.getvalue(), time.monotonic() - started


def test_a_trickling_planner_ends_the_cli_within_the_call_limit(trickler, tmp_path, monkeypatch):
    code, out, seconds = run_cli(trickler, tmp_path, monkeypatch, llm_call_seconds=2, request_seconds=20)
    assert seconds < 2 + 2, seconds
    assert code != 0 and "did not finish its reply within 2 s" in json.loads(out)["error"]


def test_a_trickling_planner_ends_the_cli_at_the_request_deadline(trickler, tmp_path, monkeypatch):
    code, out, seconds = run_cli(trickler, tmp_path, monkeypatch, llm_call_seconds=60, request_seconds=2)
    assert seconds < 2 + 2, seconds
    assert code != 0 and "longer than its limit of 2 s" in json.loads(out)["error"]


def test_two_visitors_on_byte_trickling_llm_servers_do_not_hold_up_a_third(tmp_path):
    """Concurrency 2, both taken by visitors whose typed LLM servers trickle bytes: the third visitor
    waits only until their calls' deadline, not until the servers finish (about 100 s)."""
    from app_support import app_settings, fake_catalog, running_app
    from fakes.endpoints import FakeEndpoint
    from gradio_client import Client

    with FakeLLMServer() as normal, FakeLLMServer() as trickling:
        normal.script("plan", '{"tasks": []}').script("respond", "Hello there.")
        trickling.script("*", TRICKLE)
        settings = app_settings(normal, tmp_path / "ws", app_concurrency=2, llm_call_seconds=1.5)
        with running_app(settings, catalog=fake_catalog(), endpoint=FakeEndpoint()) as demo:

            def ask(base_url: str = "") -> Any:
                typed = (base_url, "m", "k") if base_url else ("", "", "")
                message = {"text": "hello", "files": []}
                client = Client(demo.local_url, verbose=False)
                return client.submit(message, *typed, "local", 5, False, api_name="/chat")

            def timed() -> float:
                started = time.perf_counter()
                chat, _, _ = ask().result(timeout=60)
                assert "Hello there." in json.dumps(chat)
                return time.perf_counter() - started

            alone = min(timed() for _ in range(2))  # the first also warms the app up
            slow = [ask(trickling.url) for _ in range(2)]
            deadline = time.time() + 10
            while len(trickling.requests) < 2 and time.time() < deadline:  # both are trickling now
                time.sleep(0.05)
            assert len(trickling.requests) == 2
            beside = timed()
            for job in slow:
                job.result(timeout=30)
    print(f"\nthird visitor: {alone:.2f} s alone, {beside:.2f} s beside two byte-trickling servers")
    assert beside <= alone + 2.0
