"""The OpenAI-compatible API end to end: the app on 127.0.0.1 with the fake LLM server and tiny real
models, driven by the real `openai` client."""

import asyncio
import base64
import io
import re
import threading
import time
import wave

import httpx
import openai
import pytest
from app_support import app_settings, photo, running_app
from PIL import Image

from hugginggpt.commands.terminal import result_json
from hugginggpt.run.events import Done, Outcome

KEYS = ("key-one", "key-two")


@pytest.fixture(scope="module")
def api_app(llm_server, tiny_catalog, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("api_ws")
    with running_app(app_settings(llm_server, workdir, api_keys=KEYS), catalog=tiny_catalog) as demo:
        demo.workdir = workdir
        yield demo


def client(demo, key="key-two"):
    return openai.OpenAI(base_url=demo.local_url.rstrip("/") + "/v1", api_key=key, max_retries=0, timeout=120)


def image_part(path):
    url = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
    return {"type": "image_url", "image_url": {"url": url}}


def ask(text, *parts):
    return [{"role": "user", "content": [{"type": "text", "text": text}, *parts]}]


def test_models_lists_hugginggpt(api_app):
    assert [m.id for m in client(api_app).models.list()] == ["hugginggpt"]
    assert client(api_app).models.retrieve("hugginggpt").id == "hugginggpt"


def test_a_completion_answers_with_linked_files_and_the_hugginggpt_field(api_app, tmp_path):
    messages = ask("[conv-oa] caption this, draw it and read it aloud", image_part(photo(tmp_path / "s.png")))
    completion = client(api_app).chat.completions.create(model="hugginggpt", messages=messages)
    message = completion.choices[0].message
    assert completion.model == "hugginggpt" and completion.choices[0].finish_reason == "stop"
    assert message.content.startswith("Answer for conv-oa: I captioned your image")
    details = completion.model_extra["hugginggpt"]
    assert details["outcome"] == "answered" and details["answer"] in message.content
    tasks = details["tasks"]
    assert [(t["task"], t["model"], t["status"]) for t in tasks] == [
        ("image-to-text", "tiny/blip-base", "done"),
        ("text-to-image", "tiny/stable-diffusion", "done"),
        ("text-to-speech", "tiny/vits", "done"),
    ]
    drawn = next(o["url"] for o in tasks[1]["outputs"] if o["kind"] == "image")
    spoken = next(o["url"] for o in tasks[2]["outputs"] if o["kind"] == "audio")
    assert drawn.startswith(api_app.local_url.rstrip("/") + "/gradio_api/file=")
    assert f"![task 1 · text-to-image · image]({drawn})" in message.content
    assert f"[task 2 · text-to-speech · audio]({spoken})" in message.content
    # the files the answer names link to their absolute URLs (the workspace's names mean nothing here)
    assert f"]({drawn})" in details["answer"] and f"]({spoken})" in details["answer"]
    assert f"]({drawn})" in message.content.split("\n\n")[0]
    Image.open(io.BytesIO(httpx.get(drawn, trust_env=False).content)).verify()
    assert "[plan] 3 task(s)" in message.model_extra["reasoning_content"]
    assert completion.usage.total_tokens > 0
    assert not list(api_app.workdir.glob("call-*"))  # the call's workspace is gone
    # One shape for a finished run: the CLI's --json less its local trace file, files as URLs.
    cli_json = result_json(Done(Outcome.ANSWERED, request_id="r"))
    assert set(details) == set(cli_json) - {"trace_file"} and details["request_id"]
    assert set(tasks[0]) == {"id", "task", "model", "status", "error", "cached", "seed", "outputs", "resumed"}


def test_a_streamed_completion_thinks_then_answers(api_app, tmp_path):
    stream = client(api_app).chat.completions.create(
        model="hugginggpt",
        messages=ask("[conv-st] caption this", image_part(photo(tmp_path / "s.png"))),
        stream=True,
        stream_options={"include_usage": True},
    )
    order, reasoning, content, details, usage = [], [], [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if (delta.model_extra or {}).get("reasoning_content"):
            reasoning.append(delta.model_extra["reasoning_content"])
            order.append("reasoning")
        if delta.content:
            content.append(delta.content)
            order.append("content")
        if chunk.choices[0].finish_reason == "stop":
            details = chunk.model_extra["hugginggpt"]
    thinking = "".join(reasoning)
    assert "[plan] ..." in thinking and "[select] task 0 image-to-text" in thinking and "[task 1]" in thinking
    assert order.index("content") > order.index("reasoning")
    answer = "".join(content)
    assert answer.startswith("Answer for conv-st") and "![task 1 · text-to-image · image](http" in answer
    assert details["outcome"] == "answered" and len(details["tasks"]) == 3
    assert usage is not None and usage.total_tokens > 0


def test_audio_and_earlier_turns_reach_the_plan(api_app, llm_server, tmp_path):
    clip = io.BytesIO()
    with wave.open(clip, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(8000), w.writeframes(b"\x00\x01" * 4000)
    audio = {
        "type": "input_audio",
        "input_audio": {"data": base64.b64encode(clip.getvalue()).decode(), "format": "wav"},
    }
    messages = [
        *ask("what is this?", image_part(photo(tmp_path / "old.png"))),
        {"role": "assistant", "content": "A street."},
        *ask("now transcribe this", audio),
    ]
    before = len(llm_server.requests)
    reply = client(api_app).chat.completions.create(model="hugginggpt", messages=messages)
    assert reply.choices[0].message.content
    plan = next(r for r in llm_server.requests[before:] if r["stage"] == "plan")
    prompt = "\n".join(str(m["content"]) for m in plan["messages"])
    assert "- audio: audio-2.wav (attached to this message)" in prompt
    assert re.search(r"^- image: image-1\.png$", prompt, re.M)  # from the earlier turn: there, not new
    assert "A street." in prompt


def test_bad_requests_get_openai_errors(api_app, tmp_path):
    api = client(api_app)
    with pytest.raises(openai.BadRequestError, match="does not fetch URLs"):
        api.chat.completions.create(
            model="hugginggpt",
            messages=ask("look", {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}),
        )
    with pytest.raises(openai.BadRequestError, match="was not used"):
        api.chat.completions.create(
            model="hugginggpt",
            messages=ask("look", {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
        )
    with pytest.raises(openai.NotFoundError, match="use 'hugginggpt'"):
        api.chat.completions.create(model="gpt-4o", messages=ask("hi"))
    with pytest.raises(openai.BadRequestError, match="last message must be the user's"):
        api.chat.completions.create(model="hugginggpt", messages=[{"role": "assistant", "content": "hi"}])
    raw = httpx.post(
        api_app.local_url.rstrip("/") + "/v1/chat/completions",
        content=b"{not json",
        headers={"Authorization": "Bearer key-one"},
        trust_env=False,
    )
    assert raw.status_code == 400 and raw.json()["error"]["code"] == "invalid_json"


def test_a_wrong_or_missing_key_gets_401(api_app):
    with pytest.raises(openai.AuthenticationError) as wrong:
        client(api_app, key="key-three").chat.completions.create(model="hugginggpt", messages=ask("hi"))
    assert wrong.value.status_code == 401 and wrong.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        client(api_app, key="key-on").models.list()  # a prefix of a key is no key
    url = api_app.local_url.rstrip("/") + "/v1/chat/completions"
    missing = httpx.post(url, json={"model": "hugginggpt", "messages": ask("hi")}, trust_env=False)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["error"]["type"] == "invalid_request_error"
    basic = httpx.get(url.replace("chat/completions", "models"), auth=("key-one", ""), trust_env=False)
    assert basic.status_code == 401


def test_without_keys_the_api_is_off(llm_server, tiny_catalog, tmp_path):
    with running_app(app_settings(llm_server, tmp_path / "ws"), catalog=tiny_catalog) as demo:
        with pytest.raises(openai.NotFoundError, match="HUGGINGGPT_API_KEYS"):
            client(demo).chat.completions.create(model="hugginggpt", messages=ask("hi"))
        models = httpx.get(demo.local_url.rstrip("/") + "/v1/models", trust_env=False)
        assert models.status_code == 404


def test_a_client_that_hangs_up_stops_its_run(api_app, llm_server, tmp_path):
    before = len(llm_server.requests)
    stream = client(api_app).chat.completions.create(
        model="hugginggpt",
        messages=ask("[conv-gone] caption, draw and read it", image_part(photo(tmp_path / "s.png"))),
        stream=True,
    )
    for chunk in stream:
        if chunk.choices and (chunk.choices[0].delta.model_extra or {}).get("reasoning_content"):
            break  # the run has started: hang up
    stream.close()
    slots, deadline = api_app.chat_app.slots, time.monotonic() + 20
    while (slots.running or list(api_app.workdir.glob("call-*"))) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert slots.running == 0 and not list(api_app.workdir.glob("call-*"))
    stages = [r["stage"] for r in llm_server.requests[before:]]
    assert "plan" in stages and "respond" not in stages  # stopped before the answer was written


def test_every_door_shares_one_limit_on_requests_at_once(llm_server, tiny_catalog, tmp_path):
    """concurrency=1: a chat message, an MCP call and an API call sent together run one after another."""
    from gradio_client import Client
    from test_mcp import _calls

    settings = app_settings(llm_server, tmp_path / "ws", api_keys=KEYS)
    answers: dict[str, str] = {}
    with running_app(settings, catalog=tiny_catalog, concurrency=1) as demo:
        slots, peaks, stop = demo.chat_app.slots, [], threading.Event()

        def watch():
            while not stop.is_set():
                peaks.append((slots.running, slots.waiting))
                time.sleep(0.005)

        def by_api():
            reply = client(demo).chat.completions.create(model="hugginggpt", messages=ask("[conv-api] hello"))
            answers["api"] = reply.choices[0].message.content

        def by_mcp():
            (result,) = asyncio.run(_calls(demo, [("hugginggpt", {"request": "[conv-mcp1] hello"})]))
            answers["mcp1"] = result.content[0].text

        def by_chat():
            chat, _, _ = Client(demo.local_url, verbose=False).predict(
                {"text": "[conv-chat] hello", "files": []}, "", "", "", "local", 5, False, api_name="/chat"
            )
            answers["chat"] = " ".join(p.get("text", "") for m in chat for p in m["content"])

        llm_server.latency = 0.3  # each run takes a while (no models: the plan needs none)
        threads = [threading.Thread(target=f) for f in (watch, by_api, by_mcp, by_chat)]
        try:
            for t in threads:
                t.start()
            for t in threads[1:]:
                t.join(60)
        finally:
            llm_server.latency = 0.0
            stop.set()
            threads[0].join()
    for door in ("api", "mcp1", "chat"):
        assert f"Answer for conv-{door}" in answers[door]
    assert max(running for running, _ in peaks) == 1
    assert max(waiting for _, waiting in peaks) >= 1  # someone waited for the slot
