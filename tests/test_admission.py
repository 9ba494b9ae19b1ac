"""One admission path for every way in: who is calling (forwarded addresses only from declared
proxies), caps on conversations however they are made (a page load makes none), the slot before an
upload is decoded, a per-address upload budget, result cache scopes, and private file modes.

The app runs on 127.0.0.1 with the fake LLM server; events are sent as a browser sends them
(Gradio's queue protocol over real HTTP), API calls with the real `openai` client."""

import asyncio
import base64
import json
import stat
import threading
import time
import uuid

import httpx
import openai
import pytest
from app_support import app_settings, fake_catalog, photo, running_app
from fakes.endpoints import FakeEndpoint

from webui.host.callers import Callers, parse_proxies

KEY = "key-one"


def fn_index(demo, name: str) -> int:
    """The index of the page's event handler called `name`, as the browser sends it."""
    return next(i for i, f in demo.fns.items() if getattr(f.fn, "__name__", "") == name)


def event(demo, name: str, data: list, *, headers=None, session=None) -> dict:
    """Send one queued event as the browser does; its final message (process_completed)."""
    session = session or uuid.uuid4().hex
    base = demo.local_url.rstrip("/") + "/gradio_api"
    with httpx.Client(timeout=30, trust_env=False, headers=headers or {}) as http:
        body = {"data": data, "fn_index": fn_index(demo, name), "session_hash": session, "event_data": None}
        http.post(f"{base}/queue/join", json=body).raise_for_status()
        with http.stream("GET", f"{base}/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    message = json.loads(line[5:])
                    if message.get("msg") == "process_completed":
                        return message
    raise AssertionError("no process_completed")


def chat_message(text: str) -> list:
    """The page's chat event inputs: the message, the conversation key, the LLM choice, review, and
    the limits' state (none typed: the server's)."""
    return [{"text": text, "files": []}, "", "", "", "", "local", 5, False, None]


@pytest.fixture
def fake_app(llm_server, tmp_path):
    def start(**more):
        settings = app_settings(llm_server, tmp_path / "ws", **more)
        return running_app(settings, catalog=fake_catalog(), endpoint=FakeEndpoint())

    return start


# ---- who is calling -------------------------------------------------------------------------------


def test_a_forwarded_address_counts_only_from_a_declared_proxy():
    nobody, proxy, space = Callers(), Callers(["10.0.0.0/8", "127.0.0.1"]), Callers(["*"])
    assert nobody.address("127.0.0.1", ["203.0.113.9"]) == "127.0.0.1"
    assert proxy.address("198.51.100.1", ["203.0.113.9"]) == "198.51.100.1"  # not a proxy: its own address
    # Read from the right: what the caller wrote itself (the left part) is never believed.
    assert proxy.address("127.0.0.1", ["6.6.6.6, 203.0.113.9, 10.1.2.3"]) == "203.0.113.9"
    assert proxy.address("127.0.0.1", ["6.6.6.6", "203.0.113.9:5120"]) == "203.0.113.9"
    assert space.address("10.20.30.40", ["6.6.6.6, 203.0.113.9"]) == "203.0.113.9"  # one hop, any address
    assert proxy.address("127.0.0.1", []) == "127.0.0.1"
    with pytest.raises(ValueError, match="trusted_proxies"):
        parse_proxies(["proxy.example"])


def test_sixty_spoofed_forwarding_headers_from_one_client_are_one_address(fake_app):
    """Each message comes with a new session and a made-up X-Forwarded-For: all are 127.0.0.1,
    whose cap on a public app is 20 conversations."""
    with fake_app(public=True) as demo:
        table = demo.chat_app.conversations
        for n in range(60):
            event(demo, "respond", chat_message("hi"), headers={"X-Forwarded-For": f"198.51.{n}.7"})
        assert len(table) == 20
        assert {c.client for c in table.values()} == {"127.0.0.1"}
        refused = event(demo, "respond", chat_message("hi"), headers={"X-Forwarded-For": "198.51.99.7"})
        assert "Too many conversations from your address" in json.dumps(refused["output"])


def test_behind_a_declared_proxy_the_forwarded_address_is_the_caller(fake_app):
    with fake_app(trusted_proxies=("127.0.0.1",)) as demo:
        event(demo, "respond", chat_message("hi"), headers={"X-Forwarded-For": "6.6.6.6, 203.0.113.9"})
        assert [c.client for c in demo.chat_app.conversations.values()] == ["203.0.113.9"]


# ---- conversations are made by their first message, under the caps -------------------------------


def test_a_flood_of_page_loads_makes_no_conversation_and_a_visitor_still_gets_in(fake_app):
    with fake_app(public=True) as demo:
        table = demo.chat_app.conversations
        for _ in range(120):
            loaded = event(demo, "restore", [None])
            assert loaded["success"]
        assert len(table) == 0
        answered = event(demo, "respond", chat_message("[conv-in] hello"))
        assert "Answer for conv-in" in json.dumps(answered["output"]) and len(table) == 1


def test_the_per_address_cap_holds_when_the_address_is_unknown(tmp_path):
    from webui.chat.conversations import ConversationTable, TableFull

    table = ConversationTable(tmp_path / "ws", limit=50, per_client=3)
    for n in range(3):
        table.get(f"s{n}", "")
    with pytest.raises(TableFull, match="your address"):
        table.get("s3", "")


# ---- the slot first, then the upload ---------------------------------------------------------------


def test_an_api_call_decodes_its_upload_only_once_it_holds_a_slot(llm_server, tmp_path):
    settings = app_settings(llm_server, tmp_path / "ws", api_keys=(KEY,))
    with running_app(settings, catalog=fake_catalog(), endpoint=FakeEndpoint(), concurrency=1) as demo:
        slots, held = demo.chat_app.slots, threading.Event()
        assert slots.acquire(held)  # the only slot is busy
        image = "data:image/png;base64," + base64.b64encode(photo(tmp_path / "p.png").read_bytes()).decode()
        content = [
            {"type": "text", "text": "[conv-slot] caption"},
            {"type": "image_url", "image_url": {"url": image}},
        ]
        replies = []
        client = openai.OpenAI(base_url=demo.local_url + "v1", api_key=KEY, max_retries=0, timeout=60)

        def call():
            replies.append(
                client.chat.completions.create(
                    model="hugginggpt", messages=[{"role": "user", "content": content}]
                )
            )

        caller = threading.Thread(target=call)
        caller.start()
        deadline = time.monotonic() + 10
        while slots.waiting == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # had it decoded before waiting, its file would be there by now
        assert slots.waiting == 1
        assert not list((tmp_path / "ws").glob("call-*/incoming/*"))
        slots.release()
        caller.join(60)
        assert replies and "Answer for conv-slot" in replies[0].choices[0].message.content


def test_a_chat_message_decodes_its_upload_only_once_it_holds_a_slot(llm_server, tmp_path):
    """A broken picture is refused as soon as it is decoded: with the only slot busy, not before."""
    from gradio_client import Client, handle_file

    broken = tmp_path / "broken.png"
    broken.write_bytes(photo(tmp_path / "p.png").read_bytes()[:200])
    settings = app_settings(llm_server, tmp_path / "ws")
    with running_app(settings, catalog=fake_catalog(), endpoint=FakeEndpoint(), concurrency=1) as demo:
        slots = demo.chat_app.slots
        assert slots.acquire(threading.Event())
        message = {"text": "caption", "files": [handle_file(str(broken))]}
        client = Client(demo.local_url, verbose=False)
        job = client.submit(message, "", "", "", "local", 5, False, api_name="/chat")
        deadline = time.monotonic() + 10
        while slots.waiting == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)
        assert slots.waiting == 1 and not job.done()
        slots.release()
        chat, _, _ = job.result(timeout=30)
        assert "was not used" in json.dumps(chat)


def test_one_address_cannot_fill_the_queue_of_api_calls_whatever_it_forwards(llm_server, tmp_path):
    settings = app_settings(llm_server, tmp_path / "ws", api_keys=(KEY,))
    with running_app(settings, catalog=fake_catalog(), endpoint=FakeEndpoint(), concurrency=1) as demo:
        slots = demo.chat_app.slots
        slots.max_waiting_per_caller = 2
        assert slots.acquire(threading.Event())  # the only slot is busy
        results: dict[int, object] = {}

        def call(n):
            client = openai.OpenAI(
                base_url=demo.local_url + "v1",
                api_key=KEY,
                max_retries=0,
                timeout=60,
                default_headers={"X-Forwarded-For": f"198.51.{n}.7"},
            )
            try:
                reply = client.chat.completions.create(
                    model="hugginggpt", messages=[{"role": "user", "content": f"[conv-q{n}] hello"}]
                )
                results[n] = reply.choices[0].message.content
            except openai.APIStatusError as e:
                results[n] = e.status_code

        waiting = [threading.Thread(target=call, args=(n,)) for n in range(2)]
        for t in waiting:
            t.start()
        deadline = time.monotonic() + 10
        while slots.waiting < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        call(2)  # a third from the same address: refused at once, not queued
        assert results[2] == 503 and slots.waiting == 2
        slots.release()
        for t in waiting:
            t.join(60)
        assert all("Answer for conv-q" in str(results[n]) for n in range(2))


# ---- uploads: a budget per address, kept hours ------------------------------------------------------


def test_uploads_have_a_byte_budget_per_address_whatever_it_forwards(fake_app, tmp_path):
    blob = b"\x89PNG\r\n\x1a\n" + bytes(30_000)
    with fake_app(app_upload_quota_mb=0.05) as demo:
        url = demo.local_url.rstrip("/") + "/gradio_api/upload"
        statuses = []
        for n in range(3):
            with httpx.Client(timeout=30, trust_env=False) as http:
                files = {"files": (f"p{n}.png", blob, "image/png")}
                reply = http.post(url, files=files, headers={"X-Forwarded-For": f"198.51.{n}.7"})
                statuses.append(reply.status_code)
        assert statuses == [200, 429, 429]
        assert "Upload limit" in reply.text


def test_an_upload_no_conversation_took_in_is_kept_hours_not_a_day(llm_server, tmp_path):
    import app

    demo = app.build_demo(
        app_settings(llm_server, tmp_path / "ws"), catalog=fake_catalog(), endpoint=FakeEndpoint()
    )
    frequency, age = demo.delete_cache
    assert age <= 6 * 3600 and frequency <= age


# ---- result cache scopes and private files -----------------------------------------------------------


def _two_conversations(llm_server, tmp_path):
    from webui.chat.engine import ChatApp, LLMChoice

    chat = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=fake_catalog(), endpoint=FakeEndpoint())
    for session in ("s1", "s2"):
        message = {"text": "[conv-c] caption", "files": [str(photo(tmp_path / f"{session}.png"))]}
        *_, (_, _, running) = chat.respond(session, message, LLMChoice(), client="127.0.0.1")
        assert not running
    return chat


def test_a_conversations_result_cache_entries_are_deleted_with_it(llm_server, tmp_path):
    chat = _two_conversations(llm_server, tmp_path)
    cache = chat.backends.cache
    both = len(cache)
    assert both == 6  # three tasks each, the same inputs but their own scopes
    chat.reset("s1")  # the trash icon
    assert len(cache) == 3
    chat.drop("s2")  # the page left
    assert len(cache) == 0


def test_workspaces_uploads_and_cache_entries_are_the_apps_users_only(llm_server, tmp_path):
    chat = _two_conversations(llm_server, tmp_path)
    root = chat.conversations.find("s1").workspace.root

    def mode(path):
        return stat.S_IMODE(path.stat().st_mode)

    assert mode(root) == mode(root / "uploads") == mode(root / "outputs") == 0o700
    assert mode(root / "uploads" / "s1.png") == 0o600
    entries = chat.backends.cache.root / "entries"
    assert {mode(p) for p in entries.rglob("*") if p.is_dir()} | {mode(entries)} == {0o700}
    assert {mode(p) for p in entries.rglob("*") if p.is_file()} == {0o600}


def test_api_calls_share_results_by_their_callers_key_and_anonymous_mcp_calls_keep_none(llm_server, tmp_path):
    from test_mcp import _calls

    endpoint = FakeEndpoint()
    settings = app_settings(llm_server, tmp_path / "ws", api_keys=(KEY, "key-two"))
    image = "data:image/png;base64," + base64.b64encode(photo(tmp_path / "p.png").read_bytes()).decode()
    content = [
        {"type": "text", "text": "[conv-k] caption"},
        {"type": "image_url", "image_url": {"url": image}},
    ]
    with running_app(settings, catalog=fake_catalog(), endpoint=endpoint) as demo:
        cache = demo.chat_app.backends.cache

        def ask(key):
            client = openai.OpenAI(base_url=demo.local_url + "v1", api_key=key, max_retries=0, timeout=60)
            client.chat.completions.create(
                model="hugginggpt", messages=[{"role": "user", "content": content}]
            )

        for _ in range(3):
            ask(KEY)
        assert len(endpoint.calls) == 3 and len(cache) == 3  # the 2nd and 3rd calls were served from it
        ask("key-two")  # another caller: its own entries
        assert len(endpoint.calls) == 6 and len(cache) == 6
        asyncio.run(_calls(demo, [("hugginggpt", {"request": "[conv-k] caption", "files": [image]})] * 2))
        assert len(endpoint.calls) == 12 and len(cache) == 6  # anonymous: run, never kept


def test_an_mcp_task_tool_runs_as_a_one_task_plan_through_the_result_cache(llm_server, tmp_path):
    from test_mcp import _calls

    endpoint = FakeEndpoint()
    settings = app_settings(llm_server, tmp_path / "ws", cache_scope="process")
    image = "data:image/png;base64," + base64.b64encode(photo(tmp_path / "p.png").read_bytes()).decode()
    with running_app(settings, catalog=fake_catalog(), endpoint=endpoint) as demo:
        for _ in range(2):
            (result,) = asyncio.run(_calls(demo, [("image_to_text", {"image": image})]))
            assert not result.isError and json.loads(result.content[0].text)["status"] == "done"
    assert [model for _, model, _ in endpoint.calls] == ["org/captioner-a"]  # the second came from the cache


def test_what_the_page_keeps_per_visitor_needs_no_browser(llm_server, tmp_path):
    """webui.page.visitors, Gradio-free: a load opens a key and makes nothing; the first message makes
    the conversation; a reload comes back to it; a store naming a gone key gets a fresh one."""
    from webui.chat.engine import ChatApp
    from webui.page import saved
    from webui.page.visitors import Visitors

    chat = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=fake_catalog(), endpoint=FakeEndpoint())
    visitors = Visitors(chat)
    key, store = visitors.restored(None, "tab-1")
    assert saved.valid_key(key) and store["current"] == key and len(chat.conversations) == 0
    assert visitors.key(key, "tab-1") == key and visitors.key("not-a-key", "api-client") == "api-client"
    conv = chat.conversation(key, "127.0.0.1")  # its first message
    assert visitors.restored(store, "tab-2") == (key, store) and chat.find(key) is conv
    assert visitors.left("tab-1") == key and visitors.left("api-client") is None
    chat.conversations.drop(key)
    fresh, store = visitors.restored(store, "tab-2")
    assert fresh != key and store["current"] == fresh and len(chat.conversations) == 0
