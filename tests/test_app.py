"""The Gradio app end to end through gradio_client: fake LLM server on 127.0.0.1 (real openai client),
tiny real models or a scripted endpoint, the app launched in-process."""

import json
import re
import threading
import time
import wave
import zlib
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile
from app_support import app_settings, photo, running_app
from fakes.endpoints import FakeEndpoint, cards
from gradio_client import Client, handle_file
from PIL import Image

from hugginggpt.catalog import Catalog, ModelCard
from hugginggpt.config import Settings
from hugginggpt.endpoints import Call
from webui.host.uploads import check_upload
from webui.page import status

FAKE_CATALOG = Catalog(
    cards(
        ("org/captioner-a", "image-to-text", 9),
        ("org/captioner-b", "image-to-text", 5),
        ("org/painter", "text-to-image", 3),
        ("org/speaker", "text-to-speech", 2),
    )
)


class DistinctEndpoint(FakeEndpoint):
    """Scripted, but every output depends on its input, so conversations' files differ."""

    def run(self, task, model, inputs, call):
        result = super().run(task, model, inputs, call)
        outputs = result.outputs
        seed = zlib.crc32(
            repr(sorted((k, Path(v).name if isinstance(v, Path) else v) for k, v in inputs.items())).encode()
        )
        for a in outputs:
            if a.kind == "image":
                Image.new("RGB", (16, 16), colour(seed)).save(a.path)
            elif a.kind == "audio":
                soundfile.write(a.path, np.zeros(800 + seed % 800, dtype=np.float32), 8000, format="WAV")
        return result


def colour(seed: int) -> tuple[int, int, int]:
    return (seed & 255, (seed >> 8) & 255, (seed >> 16) & 255)


def titles(messages):
    """Box titles as read on screen (the state badge's markup dropped)."""
    return [
        re.sub(r"<[^>]+>", "", t) if t else t
        for t in ((m.get("metadata") or {}).get("title") for m in messages)
    ]


def texts(messages):
    return ["".join(p.get("text", "") for p in m["content"]) for m in messages]


def files_of(messages):
    return [p["file"] for m in messages for p in m["content"] if p.get("type") == "file"]


def send(client, text, files=(), **choice):
    """Submits one request; returns every streamed chat update, the trace files and the seconds until
    the plan was first shown."""
    args = (
        {"text": text, "files": [handle_file(str(f)) for f in files]},
        choice.get("base_url", ""),
        choice.get("model", ""),
        choice.get("key", ""),
        choice.get("mode", "local"),
        5,
        choice.get("review", False),
    )
    started, plan_seconds, updates = time.perf_counter(), None, []
    job = client.submit(*args, api_name="/chat")
    for update in job:
        if isinstance(update[0], Exception):  # gradio_client could not read this update (a file download)
            raise update[0]
        chat, _, _ = update
        updates.append(chat)
        if plan_seconds is None and any(t and t.startswith("Plan:") for t in titles(chat)):
            plan_seconds = time.perf_counter() - started
    chat, traces, _ = job.result()
    return updates + [chat], traces, plan_seconds


@pytest.fixture(scope="module")
def fake_app(llm_server, tmp_path_factory):
    endpoint = DistinctEndpoint(duration=0.3, hanging={"org/captioner-slow"}, hang=6)
    settings = app_settings(llm_server, tmp_path_factory.mktemp("fake_app_ws"))
    with running_app(settings, catalog=FAKE_CATALOG, endpoint=endpoint, max_upload_bytes=100_000) as demo:
        demo.endpoint = endpoint
        yield demo


# ---- end to end with real tiny models ---------------------------------------------------------


def test_image_request_streams_plan_models_progress_media_and_answer(llm_server, tiny_catalog, tmp_path):
    settings = app_settings(llm_server, tmp_path / "ws")
    with running_app(settings, catalog=tiny_catalog) as demo:
        client = Client(demo.local_url, verbose=False)
        updates, traces, plan_seconds = send(
            client, "[conv-0] caption this, draw it and read it aloud", [photo(tmp_path / "street.png")]
        )
        print(f"\nplan shown {plan_seconds:.3f} s after sending (fake LLM, local tiny models)")
        final = updates[-1]
        shown = titles(final)
        body = texts(final)

        plan = body[shown.index("Plan: 3 tasks")]
        assert "**image-to-text** (image: `street.png`) · starts at once" in plan
        assert "**text-to-speech** (text: *output of task 0*) · after task 0" in plan
        assert "Task 0 · image-to-text · tiny/blip-base · ✓ done" in shown
        assert "Task 1 · text-to-image · tiny/stable-diffusion · ✓ done" in shown
        assert "Task 2 · text-to-speech · tiny/vits · ✓ done" in shown
        caption_box = final[shown.index("Task 0 · image-to-text · tiny/blip-base · ✓ done")]
        assert caption_box["metadata"]["status"] == "done" and caption_box["metadata"]["duration"] > 0
        # a model from a local folder: named, with no link to a Hub page that does not exist
        assert "`tiny/blip-base` (a local model)" in caption_box["content"][0]["text"]
        assert "tiny/blip-base is small and runs locally" in caption_box["content"][0]["text"]
        assert "Result:" in caption_box["content"][0]["text"]  # the caption itself

        media = files_of(final)[1:]  # the first file is the upload
        image = next(f for f in media if f.endswith(".png"))
        audio = next(f for f in media if f.endswith(".wav"))
        with Image.open(image) as im:
            assert im.size[0] >= 8
        assert soundfile.info(audio).frames > 0
        answer = body[-1]
        assert answer.startswith("Answer for conv-0") and ".png" in answer and ".wav" in answer

        # Each stage streamed on its own: the plan before any task ran, a spinner while running,
        # the image shown before the answer began, the answer in several pieces.
        first_plan = next(i for i, u in enumerate(updates) if "Plan: 3 tasks" in titles(u))
        assert not any(t and t.endswith("✓ done") for t in titles(updates[first_plan]))
        assert any(m["metadata"] and m["metadata"]["status"] == "pending" for u in updates for m in u)
        first_image = next(
            i for i, u in enumerate(updates) if any(f.endswith(".png") for f in files_of(u)[1:])
        )
        first_answer = next(i for i, u in enumerate(updates) if texts(u)[-1].startswith("Answer"))
        assert first_image < first_answer
        assert len({texts(u)[-1] for u in updates[first_answer:]}) > 3

        # The trace is downloadable, holds the three LLM calls and never the API key.
        [trace_file] = traces
        trace = json.loads(Path(trace_file).read_text())
        assert [c["stage"] for c in trace["llm_calls"]] == ["plan", "select", "respond"]
        assert "sk-test-not-a-key" not in Path(trace_file).read_text()

        # Files are served from Gradio's cache, never by their workspace path.
        served = httpx.get(f"{demo.local_url}gradio_api/file={image}")
        assert served.status_code == 200 and served.content == Path(image).read_bytes()
        [conv] = demo.chat_app.conversations.values()
        made = next(conv.workspace.root.glob("outputs/*/*/*.png"))
        assert made.read_bytes() == Path(image).read_bytes()
        assert httpx.get(f"{demo.local_url}gradio_api/file={made}").status_code == 403
        assert (
            httpx.get(
                f"{demo.local_url}gradio_api/file={conv.workspace.root / 'traces' / Path(trace_file).name}"
            ).status_code
            == 403
        )

        # The page and the files it loads say where images and media may come from: the app only.
        for url in (demo.local_url, f"{demo.local_url}gradio_api/file={image}"):
            policy = httpx.get(url).headers["content-security-policy"]
            assert "img-src 'self' data: blob:; media-src 'self' data: blob:" in policy
            assert "form-action 'self'" in policy  # no form on the page posts anywhere else


# ---- many conversations, bad uploads, stop, no LLM ------------------------------------------


def test_eight_conversations_at_once_each_get_only_their_own_files_and_answer(fake_app, tmp_path):
    results, errors, clients = {}, [], []

    def converse(n):
        try:
            client = Client(fake_app.local_url, verbose=False)
            clients.append(client)  # kept open: a closed client's page "leaves" and its conversation goes
            results[n] = send(
                client,
                f"[conv-{n}] caption this, draw it and read it aloud",
                [photo(tmp_path / f"photo-{n}.png", (30 + n, 40))],
            )
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    fake_app.endpoint.peak = 0
    started = time.perf_counter()
    threads = [threading.Thread(target=converse, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    elapsed = time.perf_counter() - started
    assert not errors and len(results) == 8
    print(f"\n8 conversations in {elapsed:.2f} s; peak concurrent model calls {fake_app.endpoint.peak}")
    assert fake_app.endpoint.peak >= 4  # they really ran at the same time (each run is 3 x 0.3 s)

    seen_files = {}
    for n, (updates, traces, _) in results.items():
        final = updates[-1]
        answer = texts(final)[-1]
        assert answer.startswith(f"Answer for conv-{n}:"), answer
        assert sum("Answer for" in t for t in texts(final)) == 1  # no other conversation's answer
        # the request: its photo, then its words
        assert texts(final)[:2] == ["", f"[conv-{n}] caption this, draw it and read it aloud"]
        upload, *media = files_of(final)
        media = [m for m in media if not m.endswith(".json")]  # the trace is linked in the turn too
        assert Path(upload).name == f"photo-{n}.png" and len(media) == 2
        # the caption names this conversation's photo, and the drawing is made from that caption
        caption = next(t for t in texts(final) if "Result:" in t)
        assert f"image=photo-{n}.png" in caption
        png = next(m for m in media if m.endswith(".png"))
        seen_files[n] = Path(png).read_bytes()
        assert len(traces) == 1 and json.loads(Path(traces[0]).read_text())["request"].startswith(
            f"[conv-{n}]"
        )
    assert len(set(seen_files.values())) == 8  # eight different pictures, one per conversation
    roots = {c.workspace.root for c in fake_app.chat_app.conversations.values()}
    assert len(roots) >= 8


def test_bad_uploads_get_a_message_and_the_next_request_works(fake_app, tmp_path):
    client = Client(fake_app.local_url, verbose=False)
    corrupt = tmp_path / "broken.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    big = tmp_path / "long.wav"
    soundfile.write(big, np.zeros(80_000, dtype=np.float32), 16000, subtype="PCM_16")  # 160 kB > 100 kB
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    truncated = tmp_path / "cut.wav"
    with wave.open(str(truncated), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(8000), w.writeframes(b"\x00\x01" * 10)
    truncated.write_bytes(truncated.read_bytes()[:30])

    notes = tmp_path / "notes.txt"
    notes.write_text("not a picture")

    for bad, expected in [
        (notes, "'notes.txt' was not used: only images and audio files are accepted"),
        (corrupt, "'broken.png' was not used: it is not a readable image"),
        (big, "'long.wav' was not used: it is 160 kB, over the 100 kB limit"),
        (empty, "'empty.wav' was not used: the file is empty"),
        (truncated, "'cut.wav' was not used: it is not a readable audio file"),
    ]:
        updates, _, plan_seconds = send(client, "caption this", [bad])
        assert expected in texts(updates[-1])[-1] and "Nothing was run" in texts(updates[-1])[-1]
        assert plan_seconds is None

    updates, traces, _ = send(client, "[conv-9] caption this", [photo(tmp_path / "fine.png")])
    assert texts(updates[-1])[-1].startswith("Answer for conv-9") and len(traces) == 1


def test_stop_ends_a_running_request_at_once(fake_app, tmp_path):
    slow = Catalog(
        cards(
            ("org/captioner-slow", "image-to-text", 9),
            ("org/painter", "text-to-image", 3),
            ("org/speaker", "text-to-speech", 2),
        )
    )
    host = fake_app.host
    host.catalog, saved = slow, host.catalog
    try:
        client = Client(fake_app.local_url, verbose=False)
        job = client.submit(
            {"text": "caption", "files": [handle_file(str(photo(tmp_path / "p.png")))]},
            "",
            "",
            "",
            "local",
            5,
            False,
            api_name="/chat",
        )
        deadline = time.time() + 10
        while not any("running" in (t or "") for t in titles(job.outputs()[-1][0] if job.outputs() else [])):
            assert time.time() < deadline
            time.sleep(0.05)
        stopped = time.perf_counter()
        client.predict(api_name="/stop")
        chat_, _, _ = job.result(timeout=10)
        assert time.perf_counter() - stopped < 3.5  # the model call hangs for 6 s
        assert texts(chat_)[-1] == "Stopped."
        assert "Task 0 · image-to-text · org/captioner-slow · ■ stopped" in titles(chat_)
        assert not any(m["metadata"] and m["metadata"].get("status") == "pending" for m in chat_)
        deadline = time.time() + 2
        while not fake_app.endpoint.stopped and time.time() < deadline:
            time.sleep(0.02)
        assert fake_app.endpoint.stopped == ["org/captioner-slow"]  # the model call itself ended
    finally:
        host.catalog = saved
    # the same conversation takes the next request
    updates, _, _ = send(client, "[conv-10] caption this", [photo(tmp_path / "q.png")])
    assert texts(updates[-1])[-1].startswith("Answer for conv-10")


def test_without_a_reachable_llm_the_app_starts_and_says_what_to_configure(llm_server, tmp_path):
    settings = app_settings(llm_server, tmp_path / "ws").with_overrides(llm_base_url="http://127.0.0.1:9/v1")
    with running_app(settings, catalog=FAKE_CATALOG, endpoint=FakeEndpoint()) as demo:
        client = Client(demo.local_url, verbose=False)
        updates, _, _ = send(client, "hello")
        reply = texts(updates[-1])[-1]
        assert "127.0.0.1:9" in reply and "could not be reached" in reply
        assert "open **Settings**" in reply and "**LLM base URL**" in reply and "**API key**" in reply
        # the fix works: this session points at a server that answers, with its own key
        updates, _, _ = send(
            client,
            "[conv-11] caption this",
            [photo(tmp_path / "a.png")],
            base_url=llm_server.url,
            key="sk-user",
        )
        assert texts(updates[-1])[-1].startswith("Answer for conv-11")
        assert "Bearer sk-user" not in str(llm_server.requests[-1])  # bodies only; the key is a header


def test_a_typed_base_url_never_receives_the_servers_key(llm_server, tmp_path):
    from webui.chat.engine import ChatApp, LLMChoice

    chat = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=FAKE_CATALOG, endpoint=FakeEndpoint())
    assert chat.request_settings(LLMChoice()).llm_api_key == "sk-test-not-a-key"
    other = chat.request_settings(LLMChoice(base_url="http://127.0.0.1:1/v1"))
    assert other.llm_base_url == "http://127.0.0.1:1/v1" and other.llm_api_key is None
    assert (
        chat.request_settings(LLMChoice(base_url="http://127.0.0.1:1/v1", api_key="mine")).llm_api_key
        == "mine"
    )
    public = ChatApp(
        app_settings(llm_server, tmp_path / "ws"),
        catalog=FAKE_CATALOG,
        endpoint=FakeEndpoint(),
        public_llm_only=True,
    )
    with pytest.raises(ValueError, match="private or local"):
        public.request_settings(LLMChoice(base_url="http://10.0.0.8/v1"))
    assert "sk-" not in repr(LLMChoice(api_key="sk-secret")) and "sk-" not in repr(other)


# ---- the adapter and the upload checks, without a server --------------------------------------


def test_upload_checks(tmp_path):
    good = photo(tmp_path / "ok.png")
    assert check_upload(good, max_bytes=10**6) is None
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert "only images and audio" in check_upload(text, max_bytes=10**6)
    bomb = tmp_path / "huge.png"
    Image.new("1", (9000, 9000)).save(bomb)  # small file, 81 megapixels
    assert "too large to process" in check_upload(bomb, max_bytes=10**6)


def test_one_visitor_leaving_never_deletes_the_same_picture_another_visitor_sent(tmp_path):
    """Gradio names an upload by its content: two visitors sending one picture share its path."""
    from hugginggpt.files.workspace import Workspace
    from webui.chat.conversations import Conversation
    from webui.chat.files import Publisher

    cache = tmp_path / "gradio"
    (cache / "5eed").mkdir(parents=True)
    upload = photo(cache / "5eed" / "cat.png")  # where Gradio put both visitors' upload
    publisher = Publisher(cache)
    first, second = (Conversation(Workspace.create(tmp_path / "ws", n)) for n in ("a", "b"))
    shown = [Path(publisher.file(c, upload)) for c in (first, second)]
    assert shown[0] != shown[1] and all(p.read_bytes() == upload.read_bytes() for p in shown)
    first.remove()
    assert not shown[0].exists() and not shown[0].parent.exists()  # the one who left: gone
    assert shown[1].is_file() and upload.is_file()  # the other's picture still shows


def test_new_conversation_gets_a_fresh_workspace_and_history(llm_server, tmp_path):
    from webui.chat.engine import ChatApp, LLMChoice

    chat = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=FAKE_CATALOG, endpoint=FakeEndpoint())
    *_, (_, _, running) = chat.respond(
        "s1", {"text": "[conv-12] caption", "files": [str(photo(tmp_path / "a.png"))]}, LLMChoice()
    )
    first = chat.conversation("s1", "")
    assert not running and len(first.history) == 2 and (first.workspace.root / "uploads" / "a.png").is_file()
    assert chat.conversation("s2", "").workspace.root != first.workspace.root  # another session
    chat.reset("s1")
    fresh = chat.conversation("s1", "")
    assert fresh.workspace.root != first.workspace.root and fresh.history == [] and fresh.display == []
    assert "a.png" not in fresh.workspace.files() and not first.workspace.root.exists()  # files deleted


def test_a_flood_of_new_sessions_never_pushes_out_an_active_conversation(tmp_path):
    from webui.chat.conversations import ConversationTable, TableFull

    now = [0.0]
    table = ConversationTable(tmp_path / "ws", limit=50, per_client=5, idle_seconds=600, clock=lambda: now[0])
    active = table.get("visitor", "10.0.0.1")
    (active.workspace.root / "uploads" / "photo.png").write_bytes(b"png")
    refused = 0
    for n in range(510):  # anonymous requests, each with a fresh session, from a few addresses
        try:
            table.get(f"flood-{n}", f"10.0.1.{n % 12}")
        except TableFull as e:
            refused += 1
            assert "try again" in str(e) or "Too many conversations from your address" in str(e)
    assert refused == 510 - 49 and table.find("visitor") is active
    assert (active.workspace.root / "uploads" / "photo.png").is_file()

    now[0] += 300  # the visitor comes back: still there; the flood's conversations idle on
    assert table.get("visitor", "10.0.0.1") is active
    now[0] += 400  # the flood's conversations have been idle 700 s, the visitor's 400 s
    table.get("visitor", "10.0.0.1")
    assert list(table) == ["visitor"] and active.workspace.root.exists()
    now[0] += 700  # idle past the limit: the conversation ends and its files go
    table.get("someone-else", "10.0.2.1")
    assert table.find("visitor") is None and not active.workspace.root.exists()


def test_zerogpu_calls_carry_the_request_context_and_a_duration_per_call(tmp_path):
    import contextvars

    from webui.host.gpu import MAX_SECONDS, GPUEndpoint, _duration, gpu_seconds, on_gpu

    inner = FakeEndpoint()
    assert on_gpu(inner) is inner  # off ZeroGPU `spaces.GPU` passes the function through: unchanged
    calls = []
    marker = contextvars.ContextVar("request", default=None)

    def runner(endpoint, task, model, inputs, out_dir):  # what spaces.GPU's wrapper receives
        calls.append((_duration(endpoint, task, model, inputs, out_dir), marker.get()))
        return endpoint.run(task, model, inputs, Call(out_dir=out_dir))

    marker.set("request-1")
    wrapped = GPUEndpoint(inner, contextvars.copy_context(), runner=runner)
    marker.set(None)
    assert "ZeroGPU" in wrapped.describe()
    [card] = FAKE_CATALOG.candidates("text-to-image")
    call = Call(out_dir=tmp_path)
    done = threading.Thread(target=wrapped.run, args=("text-to-image", card, {"text": "a cat"}, call))
    done.start(), done.join()  # from a worker thread, as the scheduler calls it
    assert calls == [(gpu_seconds("text-to-image", card), "request-1")] and inner.calls[0][1] == "org/painter"
    big = ModelCard(id="big", task="text-to-video", size_bytes=60 * 10**9)
    small = ModelCard(id="small", task="image-classification", size_bytes=10**8)
    assert gpu_seconds("text-to-video", big) == MAX_SECONDS  # within the tier's limit
    assert gpu_seconds("image-classification", small) < gpu_seconds("text-to-image", card) < MAX_SECONDS


def test_the_real_spaces_package_is_a_no_op_off_zerogpu():
    spaces = pytest.importorskip("spaces")

    def task(x):
        return x * 2

    assert spaces.GPU(duration=lambda x: 5)(task) is task


def test_spaces_is_imported_before_torch_and_the_gpu_function_is_decorated_at_import(tmp_path):
    """What ZeroGPU needs and a CPU machine can check: `spaces` first, the decorated function made
    when the app is imported (before launch), and CUDA untouched."""
    import subprocess
    import sys

    stub = tmp_path / "stub" / "spaces"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(
        "import sys\n"
        "TORCH_BEFORE = 'torch' in sys.modules\n"
        "DECORATED = []\n"
        "def GPU(duration=None):\n"
        "    def wrap(fn):\n"
        "        DECORATED.append((fn.__name__, duration))\n"
        "        def run(*args, **kwargs):\n"
        "            return fn(*args, **kwargs)\n"
        "        return run\n"
        "    return wrap\n"
    )
    check = (
        "import sys; import app; import spaces, webui.host.gpu as g\n"
        "assert not spaces.TORCH_BEFORE, 'torch was imported before spaces'\n"
        "assert [n for n, _ in spaces.DECORATED] == ['_on_gpu'] and g.zerogpu_active()\n"
        "import torch; assert not torch.cuda.is_initialized()\n"
        "print('ok')\n"
    )
    env = {**__import__("os").environ, "PYTHONPATH": f"{stub.parent}:{Path(__file__).parent.parent}"}
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_unparsable_typed_base_url_is_a_settings_problem_in_the_chat(tmp_path):
    from hugginggpt.config import Settings
    from webui.chat.engine import ChatApp, LLMChoice

    chat = ChatApp(Settings(workdir=str(tmp_path / "ws")), catalog=Catalog([]), endpoint=FakeEndpoint())
    *_, (messages, _, running) = chat.respond(
        "s1", {"text": "hi", "files": []}, LLMChoice(base_url="http://[::1")
    )
    assert (
        not running
        and "Settings problem" in messages[-1]["content"]
        and "http://[::1" in messages[-1]["content"]
    )
    *_, (messages, _, _) = chat.respond(
        "s1", {"text": "hi", "files": []}, LLMChoice(base_url="http://a:b:c/v1")
    )
    assert "Settings problem" in messages[-1]["content"]


def test_on_a_public_app_a_typed_llm_url_gets_a_client_that_stays_off_private_networks(tmp_path, monkeypatch):
    from test_trust import _Redirecting, only_loopback

    from hugginggpt.config import Settings
    from hugginggpt.files import urlguard
    from webui.chat.engine import ChatApp, LLMChoice

    servers = _Redirecting()  # public (127.0.0.1 here) but redirecting to a private address
    try:
        monkeypatch.setattr(urlguard, "is_public", only_loopback)
        chat = ChatApp(
            Settings(workdir=str(tmp_path / "ws")),
            catalog=Catalog([]),
            endpoint=FakeEndpoint(),
            public_llm_only=True,
        )
        s = chat.request_settings(LLMChoice(base_url=servers.url, model="m"), resolve=False)
        llm = chat.host.llm_for(s)
        with pytest.raises(Exception, match="not public"):
            llm.complete([{"role": "user", "content": "hi"}], stage="plan")
        assert servers.private_hits == []
    finally:
        servers.close()


def test_the_status_line_never_shows_a_password_in_the_servers_base_url(tmp_path):
    from hugginggpt.config import Settings
    from webui.chat.engine import ChatApp, LLMChoice

    chat = ChatApp(
        Settings(llm_base_url="http://op:pw-secret@127.0.0.1:9/v1", workdir=str(tmp_path / "ws")),
        catalog=Catalog([]),
        endpoint=FakeEndpoint(),
    )
    line = status.for_host(chat.host, LLMChoice())
    assert "127.0.0.1:9/v1" in line and "pw-secret" not in line


def test_on_a_public_app_visitors_pick_only_the_operators_local_models(tmp_path):
    from webui.chat.engine import ChatApp, LLMChoice

    settings = Settings(workdir=str(tmp_path / "ws"), allowed_local_llms=("tiny/chat",))
    public = ChatApp(settings, catalog=FAKE_CATALOG, endpoint=FakeEndpoint(), public_llm_only=True)
    for typed in ("/etc", "/", str(tmp_path), "someone/huge-model"):
        with pytest.raises(ValueError, match="one of its own local models"):
            public.request_settings(LLMChoice(model=typed))
    assert public.request_settings(LLMChoice(model="tiny/chat")).llm_model == "tiny/chat"
    private = ChatApp(settings, catalog=FAKE_CATALOG, endpoint=FakeEndpoint(), public_llm_only=False)
    assert private.request_settings(LLMChoice(model=str(tmp_path))).llm_model == str(tmp_path)


def test_a_secret_in_the_base_urls_query_never_reaches_the_status_line(tmp_path):
    from webui.chat.engine import ChatApp, LLMChoice

    settings = Settings(
        workdir=str(tmp_path / "ws"), llm_base_url="https://u:pw@llm.example/v1?api-key=sk-q1"
    )
    line = status.for_host(ChatApp(settings, catalog=FAKE_CATALOG, endpoint=FakeEndpoint()).host, LLMChoice())
    assert "sk-q1" not in line and "pw" not in line and "api-key=***" in line


def test_two_visitors_on_trickling_llm_servers_do_not_slow_a_third(tmp_path):
    from fakes.llm_server import FakeLLMServer, Reply

    with FakeLLMServer() as normal, FakeLLMServer() as trickling:
        normal.script("plan", '{"tasks": []}').script("respond", "Hello there.")
        trickle = Reply("tick " * 40, chunk_delay=0.25)  # ten seconds a reply
        trickling.responder = lambda stage, body: trickle
        settings = app_settings(normal, tmp_path / "ws")
        with running_app(settings, catalog=FAKE_CATALOG, endpoint=FakeEndpoint()) as demo:

            def timed_request() -> float:
                started = time.perf_counter()
                updates, _, _ = send(Client(demo.local_url, verbose=False), "hello")
                assert "Hello there." in texts(updates[-1])
                return time.perf_counter() - started

            alone = min(timed_request() for _ in range(2))  # the first also warms the app up
            slow = [
                Client(demo.local_url, verbose=False).submit(
                    {"text": "hello", "files": []},
                    trickling.url,
                    "m",
                    "k",
                    "local",
                    5,
                    False,
                    api_name="/chat",
                )
                for _ in range(2)
            ]
            deadline = time.time() + 10
            while len(trickling.requests) < 2 and time.time() < deadline:  # both are trickling now
                time.sleep(0.05)
            assert len(trickling.requests) == 2
            beside = timed_request()
            assert not any(job.done() for job in slow)  # they were still trickling all along
            trickle.chunk_delay = 0  # now they may end
            for job in slow:  # their streams end before the app closes (else it waits 5 s for them)
                job.result(timeout=30)
    print(f"\nthird visitor: {alone:.2f} s alone, {beside:.2f} s beside two trickling servers")
    assert beside <= alone + 1.0


def test_leaving_the_page_mid_run_ends_the_work_without_a_crash_or_a_file_left(llm_server, tmp_path, caplog):
    """A model that ignores Stop finishes after the page is gone: no LLM call follows, nothing it
    writes stays, and the log has no crash."""
    from webui.chat.engine import ChatApp, LLMChoice

    endpoint = FakeEndpoint(duration=1.0)  # does not look at the stop signal
    chat = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=FAKE_CATALOG, endpoint=endpoint)
    updates = chat.respond(
        "s1", {"text": "[conv-left] caption", "files": [str(photo(tmp_path / "a.png"))]}, LLMChoice()
    )
    conv = chat.conversation("s1", "")
    before = len(llm_server.requests)
    for _ in updates:
        if endpoint.calls:  # a model is running: the page is closed now
            calls_at_leave = len(llm_server.requests)
            chat.drop("s1")
            break
    updates.close()
    deadline = time.time() + 10
    while conv.cancel is not None and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(1.5)  # the model's call ends in the background
    assert not conv.workspace.root.exists()
    assert len(llm_server.requests) == calls_at_leave > before  # no correction, selection or answer after
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


def test_with_no_llm_configured_and_no_network_the_first_message_says_what_to_set(tmp_path):
    from webui.chat.engine import CONFIGURE_HINT, ChatApp, LLMChoice

    settings = Settings(workdir=str(tmp_path / "ws"), local_llm_model="nobody/not-downloaded")
    chat = ChatApp(settings, catalog=FAKE_CATALOG, endpoint=FakeEndpoint())
    warm = chat.backends.warm_up()  # as at app start
    started = time.perf_counter()
    *_, (messages, _, running) = chat.respond("s1", {"text": "hello", "files": []}, LLMChoice())
    assert time.perf_counter() - started < 5 and not running
    assert "not downloaded, and HF_HUB_OFFLINE is set" in messages[-1]["content"]
    assert CONFIGURE_HINT in messages[-1]["content"]
    warm.join(30)
    assert "local LLM is not available" in status.for_host(chat.host, LLMChoice())


def test_sign_in_with_hugging_face_uses_gradios_oauth_and_the_visitors_token(
    llm_server, tmp_path, monkeypatch
):
    """With hf_oauth the page offers sign-in (Gradio's local mock off a Space) and a signed-in
    visitor's token is what their hosted calls carry; the server's own token stays for the others."""
    import gradio.oauth

    from webui.chat.engine import ChatApp

    monkeypatch.setenv("HF_TOKEN", "hf_server_token")
    monkeypatch.setattr(
        gradio.oauth,
        "whoami",
        lambda *a, **k: {"type": "user", "name": "v", "fullname": "V", "avatarUrl": ""},
    )
    settings = app_settings(llm_server, tmp_path / "ws", oauth=True, hf_token="hf_server_token")
    with running_app(settings, catalog=FAKE_CATALOG, endpoint=FakeEndpoint()) as demo:
        config = httpx.get(f"{demo.local_url}config").json()
        assert any(c.get("props", {}).get("elem_id") == "login" for c in config["components"])
        login = httpx.get(f"{demo.local_url}login/huggingface", follow_redirects=False)
        assert login.status_code in (302, 307) and "/login/callback" in login.headers["location"]
        chat_fn = next(f for f in demo.fns.values() if f.api_name == "chat")
        assert chat_fn.fn.__name__ == "respond_signed_in"

    # One shared endpoint; the visitor's token travels with the run's calls (Call.credentials).
    host = ChatApp(settings, catalog=FAKE_CATALOG).host
    visitor = host.pipeline(settings, caller="v", hf_token="hf_visitor_token")
    anonymous = host.pipeline(settings, caller="a")
    assert visitor.credentials.hf_token == "hf_visitor_token" and anonymous.credentials.hf_token is None
    shared = host.backends._backends or {}
    assert shared["hosted"].token == "hf_server_token"  # type: ignore[attr-defined]  # one for all


def test_refused_catalog_entries_show_in_the_status_line(tmp_path):
    from webui.chat.engine import ChatApp, LLMChoice

    mine = tmp_path / "mine.yaml"
    mine.write_text("- {id: a, task: make-coffee}\n- {id: b, task: summarization, extra: 1}\n")
    settings = Settings(workdir=str(tmp_path / "ws"), catalog_paths=(str(mine),), llm_base_url="http://x/v1")
    line = status.for_host(ChatApp(settings, endpoint=FakeEndpoint()).host, LLMChoice())
    assert "(1 catalog entries refused: see the server log)" in line  # the warning alone refuses nothing


def test_the_space_front_matter_names_catalog_models_and_preloads_only_those():
    import yaml

    from hugginggpt.catalog import load_catalog

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    front = yaml.safe_load(text.split("---")[1])
    catalog = load_catalog([])
    known = {card.id for task in catalog.tasks() for card in catalog.ranked(task) if card.local}
    assert front["hf_oauth"] is True and front["app_file"] == "app.py"
    assert set(front["models"]) - {"microsoft/speecht5_hifigan"} <= known  # the vocoder is SpeechT5's
    assert {entry.split()[0] for entry in front["preload_from_hub"]} <= set(front["models"])
