"""The MCP server end to end: the app on 127.0.0.1 with the fake LLM server and tiny real models, driven
by the real `mcp` client over streamable HTTP."""

import asyncio
import base64
import io
import json
import threading
import time

import httpx
import pytest
from app_support import app_settings, photo, running_app
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from PIL import Image

from hugginggpt.catalog import Catalog, ModelCard


@pytest.fixture(scope="module")
def mcp_app(llm_server, tiny_catalog, tiny_vit, tmp_path_factory):
    vit = ModelCard(id="tiny/vit", task="image-classification", path=tiny_vit, local=True, downloads=300)
    catalog = Catalog([*tiny_catalog, vit])
    workdir = tmp_path_factory.mktemp("mcp_ws")
    with running_app(app_settings(llm_server, workdir), catalog=catalog) as demo:
        demo.workdir = workdir
        yield demo


def data_url(path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def call(demo, name, arguments, headers=None):
    return asyncio.run(_calls(demo, [(name, arguments)], headers))[0]


async def _calls(demo, calls, headers=None):
    """Each call in its own MCP session, all at once."""

    async def one(name, arguments):
        client = httpx.AsyncClient(headers=headers or {}, timeout=120, trust_env=False)
        async with client, streamable_http_client(mcp_url(demo), http_client=client) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                if name is None:
                    return await session.list_tools()
                return await session.call_tool(name, arguments)

    return await asyncio.gather(*(one(n, a) for n, a in calls))


def mcp_url(demo) -> str:
    return demo.local_url.rstrip("/") + "/gradio_api/mcp/"


def texts(result) -> list[str]:
    return [c.text for c in result.content if c.type == "text"]


def test_tools_are_the_pipeline_and_one_per_task_type_and_not_the_chat(mcp_app):
    tools = {t.name: t for t in call(mcp_app, None, None).tools}
    for name in ("hugginggpt", "image_classification", "object_detection", "text_to_image"):
        assert name in tools
    assert "automatic_speech_recognition" in tools and "text_to_speech" in tools
    # The chat's events carry a browser session and its Settings: never tools.
    assert not {"respond", "chat", "on_stop", "on_clear", "show_status", "on_unload"} & set(tools)
    assert not any(n.endswith("control") for n in tools)  # ControlNet steps: through hugginggpt
    pipeline = tools["hugginggpt"]
    assert "multi-step" in pipeline.description and "task tools" in pipeline.description
    assert pipeline.inputSchema["required"] == ["request"]
    assert set(pipeline.inputSchema["properties"]) == {"request", "files"}  # no credentials as arguments
    assert "data URL" in pipeline.inputSchema["properties"]["files"]["description"]
    detect = tools["object_detection"]
    assert detect.inputSchema["required"] == ["image"]
    assert set(detect.inputSchema["properties"]) == {"image", "model"}
    assert "no LLM call" in detect.description and "hugginggpt tool" in detect.description
    assert "catalog" in detect.inputSchema["properties"]["model"]["description"]
    assert set(tools["text_to_image"].inputSchema["properties"]) == {"text", "model"}


def test_hugginggpt_answers_with_the_produced_image_and_cleans_up(mcp_app, llm_server, tmp_path):
    image = photo(tmp_path / "street.png")
    result = call(
        mcp_app,
        "hugginggpt",
        {"request": "[conv-mcp] caption it, draw it, read it", "files": [data_url(image)]},
    )
    assert not result.isError, texts(result)
    payload = json.loads(texts(result)[0])
    assert payload["outcome"] == "answered" and "Answer for conv-mcp" in payload["answer"]
    assert [(t["task"], t["model"], t["status"]) for t in payload["tasks"]] == [
        ("image-to-text", "tiny/blip-base", "done"),
        ("text-to-image", "tiny/stable-diffusion", "done"),
        ("text-to-speech", "tiny/vits", "done"),
    ]
    assert payload["llm_calls"] == 3
    drawn = next(o for o in payload["tasks"][1]["outputs"] if o["kind"] == "image")
    spoken = next(o for o in payload["tasks"][2]["outputs"] if o["kind"] == "audio")
    # The produced image comes as MCP image content, and every file as a URL anyone with it can fetch.
    (content,) = [c for c in result.content if c.type == "image"]
    shown = Image.open(io.BytesIO(base64.b64decode(content.data)))
    fetched = httpx.get(drawn["url"], trust_env=False)
    assert fetched.status_code == 200
    assert Image.open(io.BytesIO(fetched.content)).size == shown.size
    assert httpx.get(spoken["url"], trust_env=False).content[:4] == b"RIFF"
    assert any(drawn["url"] in t for t in texts(result))
    assert f"]({drawn['url']})" in payload["answer"] and f"]({spoken['url']})" in payload["answer"]
    # The call's workspace is gone; its files live on in Gradio's cache.
    assert not list(mcp_app.workdir.glob("call-*"))


def test_a_task_tool_runs_its_model_without_the_llm(mcp_app, llm_server, tmp_path):
    image = photo(tmp_path / "cat.png")
    before = len(llm_server.requests)
    result = call(mcp_app, "image_classification", {"image": data_url(image)})
    assert not result.isError, texts(result)
    payload = json.loads(texts(result)[0])
    assert (payload["task"], payload["model"], payload["status"]) == (
        "image-classification",
        "tiny/vit",
        "done",
    )
    kinds = [o["kind"] for o in payload["outputs"]]
    assert kinds == ["text", "data"] and payload["outputs"][1]["value"]
    assert "No image was generated" in texts(result)[1]
    assert len(llm_server.requests) == before  # zero LLM calls
    named = call(mcp_app, "image_classification", {"image": data_url(image), "model": "tiny/vit"})
    assert json.loads(texts(named)[0])["model"] == "tiny/vit"


def test_tool_errors_are_clear_sentences(mcp_app, tmp_path):
    image = photo(tmp_path / "p.png")
    unknown = call(mcp_app, "image_classification", {"image": data_url(image), "model": "org/not-there"})
    assert (
        unknown.isError and "not a image-classification model in this server's catalog" in texts(unknown)[0]
    )
    broken = call(mcp_app, "image_classification", {"image": "data:image/png;base64,iVBORw0KGgoAAAA="})
    assert broken.isError and "was not used" in texts(broken)[0]
    fetched = call(mcp_app, "image_classification", {"image": "http://127.0.0.1:1/x.png"})
    assert fetched.isError and "does not fetch URLs" in texts(fetched)[0]
    headers = {"X-LLM-Base-URL": "ftp://example.com"}
    bad = call(mcp_app, "hugginggpt", {"request": "hello", "files": []}, headers=headers)
    assert bad.isError and "Settings problem" in texts(bad)[0] and "Traceback" not in texts(bad)[0]


def test_credentials_come_from_headers(mcp_app, llm_server):
    before = len(llm_server.requests)
    result = call(
        mcp_app, "hugginggpt", {"request": "say hello"}, headers={"X-LLM-Model": "model-from-header"}
    )
    assert not result.isError, texts(result)
    assert {r["model"] for r in llm_server.requests[before:]} == {"model-from-header"}


def test_two_concurrent_calls_get_separate_workspaces(mcp_app, llm_server, tmp_path):
    seen, stop = [], threading.Event()

    def watch():  # the call workspaces that exist at each moment
        while not stop.is_set():
            seen.append({p.name for p in mcp_app.workdir.glob("call-*")})
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    before = len(llm_server.requests)
    small, large = photo(tmp_path / "a.png", (40, 32)), photo(tmp_path / "b.png", (64, 48))
    try:
        results = asyncio.run(
            _calls(
                mcp_app,
                [
                    ("hugginggpt", {"request": "[conv-a] caption it", "files": [data_url(small)]}),
                    ("hugginggpt", {"request": "[conv-b] caption it", "files": [data_url(large)]}),
                ],
            )
        )
    finally:
        stop.set()
        watcher.join()
    answers = [json.loads(texts(r)[0])["answer"] for r in results]
    assert "Answer for conv-a" in answers[0] and "Answer for conv-b" in answers[1]
    # Each plan saw only its own file, under the same name: two folders, not one shared conversation.
    plans = [r["messages"][-1]["content"] for r in llm_server.requests[before:] if r["stage"] == "plan"]
    assert len(plans) == 2
    for plan in plans:
        assert plan.count("- image: ") == 1 and "- image: file-1.png (attached to this message)" in plan
    assert max(len(s) for s in seen) == 2
    assert not list(mcp_app.workdir.glob("call-*"))


def test_hugginggpt_is_an_expert_of_another_hugginggpt(mcp_app, tmp_path):
    """Another instance adds this one's MCP door as tools and runs one of them as an expert."""
    from hugginggpt.catalog import load_catalog
    from hugginggpt.catalog.__main__ import main
    from hugginggpt.endpoints import Call, McpToolEndpoint

    out = tmp_path / "tools.jsonl"
    assert main(["add-mcp", mcp_url(mcp_app), "--tool", "image_classification", "--out", str(out)]) == 0
    (card,) = load_catalog([out], shipped=None)
    assert card.tool.media == (("image", "image"),)
    image = photo(tmp_path / "cat.png")
    outputs = (
        McpToolEndpoint(timeout=120)
        .run(card.task, card, {"image": image}, Call(out_dir=tmp_path / "o"))
        .outputs
    )
    assert any(a.kind == "text" and "tiny/vit" in a.value for a in outputs), outputs
