"""The Gradio app end to end through gradio_client: fake LLM server on 127.0.0.1 (real openai client),
tiny real models or a scripted endpoint, the app launched in-process."""

import json
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

from hugginggpt.artifacts import Artifact
from hugginggpt.catalog import Catalog
from hugginggpt.events import (
    ModelSelected,
    PlanReady,
    PlanRejected,
    StageStarted,
    TaskFailed,
    TaskFinished,
    TaskStarted,
)
from hugginggpt.plan import Plan, Task
from webui.render import RunView, model_link, plan_markdown
from webui.uploads import check_upload

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

    def run(self, task, model, inputs, out_dir, *, stop=None):
        outputs = super().run(task, model, inputs, out_dir, stop=stop)
        seed = zlib.crc32(
            repr(sorted((k, Path(v).name if isinstance(v, Path) else v) for k, v in inputs.items())).encode()
        )
        for a in outputs:
            if a.kind == "image":
                Image.new("RGB", (16, 16), colour(seed)).save(a.path)
            elif a.kind == "audio":
                soundfile.write(a.path, np.zeros(800 + seed % 800, dtype=np.float32), 8000, format="WAV")
        return outputs


def colour(seed: int) -> tuple[int, int, int]:
    return (seed & 255, (seed >> 8) & 255, (seed >> 16) & 255)


def titles(messages):
    return [(m.get("metadata") or {}).get("title") for m in messages]


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
    )
    started, plan_seconds, updates = time.perf_counter(), None, []
    job = client.submit(*args, api_name="/chat")
    for chat, _, _ in job:
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
        assert "Task 0 · image-to-text · tiny/blip-base · done" in shown
        assert "Task 1 · text-to-image · tiny/stable-diffusion · done" in shown
        assert "Task 2 · text-to-speech · tiny/vits · done" in shown
        caption_box = final[shown.index("Task 0 · image-to-text · tiny/blip-base · done")]
        assert caption_box["metadata"]["status"] == "done" and caption_box["metadata"]["duration"] > 0
        assert "[tiny/blip-base](https://huggingface.co/tiny/blip-base)" in caption_box["content"][0]["text"]
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
        assert not any(t and t.endswith("· done") for t in titles(updates[first_plan]))
        assert any(m["metadata"] and m["metadata"]["status"] == "pending" for u in updates for m in u)
        first_image = next(i for i, u in enumerate(updates) if len(files_of(u)) > 1)
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
            assert (
                httpx.get(url).headers["content-security-policy"]
                == "img-src 'self' data: blob:; media-src 'self' data: blob:"
            )


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
        assert texts(final)[0] == f"[conv-{n}] caption this, draw it and read it aloud"
        upload, *media = files_of(final)
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
    chat = fake_app.chat_app
    chat.catalog, saved = slow, chat.catalog
    try:
        client = Client(fake_app.local_url, verbose=False)
        job = client.submit(
            {"text": "caption", "files": [handle_file(str(photo(tmp_path / "p.png")))]},
            "",
            "",
            "",
            "local",
            5,
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
        assert "Task 0 · image-to-text · org/captioner-slow · stopped" in titles(chat_)
        assert not any(m["metadata"] and m["metadata"]["status"] == "pending" for m in chat_)
        deadline = time.time() + 2
        while not fake_app.endpoint.stopped and time.time() < deadline:
            time.sleep(0.02)
        assert fake_app.endpoint.stopped == ["org/captioner-slow"]  # the model call itself ended
    finally:
        chat.catalog = saved
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
    from webui.chat import ChatApp, LLMChoice

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


def test_events_become_messages_with_links_spinners_and_durations(tmp_path):
    clock = iter(range(100))
    view = RunView("r1", clock=lambda: float(next(clock)))
    plan = Plan(
        [
            Task(0, "object-detection", [], {"image": "a.png"}),
            Task(1, "image-to-text", [0], {"image": "<resource>-0"}),
        ]
    )
    view.feed(StageStarted("plan"))
    assert view.messages[0]["metadata"]["status"] == "pending"
    view.feed(PlanRejected(1, ["task 0: argument 'image' names 'b.png', which is not a file here"]))
    assert "Attempt 1 was rejected" in view.messages[0]["content"] and "b.png" in view.messages[0]["content"]
    view.feed(PlanReady(plan, 2))
    view.feed(StageStarted("select"))
    view.feed(
        ModelSelected(
            0, "object-detection", "facebook/detr-resnet-50", "best boxes", ["facebook/detr-resnet-50", "x/y"]
        )
    )
    view.feed(TaskStarted(0, "object-detection", "facebook/detr-resnet-50"))
    image = tmp_path / "boxes.png"
    view.feed(
        TaskFinished(
            0,
            "object-detection",
            "facebook/detr-resnet-50",
            [Artifact("image", path=image), Artifact("data", value=[{"label": "cat"}])],
            1.5,
        )
    )
    view.feed(TaskFailed(1, "image-to-text", "", "no model in the catalog can run image-to-text", True))
    by_title = {m["metadata"]["title"]: m for m in view.messages if m.get("metadata")}
    assert by_title["Plan: 2 tasks (after 2 attempts)"]["metadata"]["status"] == "done"
    done = by_title["Task 0 · object-detection · facebook/detr-resnet-50 · done"]
    assert done["metadata"]["duration"] == 1.5 and "[x/y](https://huggingface.co/x/y)" in done["content"]
    assert '"label": "cat"' in done["content"]
    failed = by_title["Task 1 · image-to-text · failed"]
    assert failed["metadata"]["status"] == "done" and "no model in the catalog" in failed["content"]
    assert {"role": "assistant", "content": {"path": str(image)}} in view.messages
    assert len({m["metadata"]["id"] for m in view.messages if m.get("metadata")}) == 4
    assert "after task 0" in plan_markdown(plan) and model_link("not a hub id!") == "`not a hub id!`"


def test_upload_checks(tmp_path):
    good = photo(tmp_path / "ok.png")
    assert check_upload(good, max_bytes=10**6) is None
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert "only images and audio" in check_upload(text, max_bytes=10**6)
    bomb = tmp_path / "huge.png"
    Image.new("1", (9000, 9000)).save(bomb)  # small file, 81 megapixels
    assert "too large to process" in check_upload(bomb, max_bytes=10**6)


def test_new_conversation_gets_a_fresh_workspace_and_history(llm_server, tmp_path):
    from webui.chat import ChatApp, LLMChoice

    chat = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=FAKE_CATALOG, endpoint=FakeEndpoint())
    *_, (_, _, running) = chat.respond(
        "s1", {"text": "[conv-12] caption", "files": [str(photo(tmp_path / "a.png"))]}, LLMChoice()
    )
    first = chat.conversation("s1")
    assert not running and len(first.history) == 2 and (first.workspace.root / "uploads" / "a.png").is_file()
    assert chat.conversation("s2").workspace.root != first.workspace.root  # another session, another folder
    chat.reset("s1")
    fresh = chat.conversation("s1")
    assert fresh.workspace.root != first.workspace.root and fresh.history == [] and fresh.display == []
    assert "a.png" not in fresh.workspace.files() and not first.workspace.root.exists()  # files deleted

    chat.conversations.limit = 3  # API clients that never leave: the least recently used go first
    for n in range(3, 7):
        chat.conversation(f"s{n}")
    assert list(chat.conversations) == ["s4", "s5", "s6"]


def test_zerogpu_wraps_local_model_calls_in_spaces_gpu(monkeypatch, tmp_path):
    import contextvars
    import sys
    import types

    from webui.gpu import GPUEndpoint, on_gpu

    inner = FakeEndpoint()
    assert on_gpu(inner) is inner  # no `spaces` package: unchanged
    calls = []
    marker = contextvars.ContextVar("request", default=None)

    def gpu(duration):
        def wrap(fn):
            def run(*args):
                calls.append((duration, marker.get()))  # what spaces.GPU sees: the request's context
                return fn(*args)

            return run

        return wrap

    monkeypatch.setitem(sys.modules, "spaces", types.SimpleNamespace(GPU=gpu))
    marker.set("request-1")
    wrapped = on_gpu(inner, contextvars.copy_context())
    marker.set(None)
    assert isinstance(wrapped, GPUEndpoint) and "ZeroGPU" in wrapped.describe()
    [card] = FAKE_CATALOG.candidates("text-to-image")
    done = threading.Thread(target=wrapped.run, args=("text-to-image", card, {"text": "a cat"}, tmp_path))
    done.start(), done.join()  # from a worker thread, as the scheduler calls it
    assert calls == [(120, "request-1")] and inner.calls[0][1] == "org/painter"


def test_unparsable_typed_base_url_is_a_settings_problem_in_the_chat(tmp_path):
    from hugginggpt.config import Settings
    from webui.chat import ChatApp, LLMChoice

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

    from hugginggpt import urlguard
    from hugginggpt.config import Settings
    from webui.chat import ChatApp, LLMChoice

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
        llm = chat.llm_for(s)
        with pytest.raises(Exception, match="not public"):
            llm.complete([{"role": "user", "content": "hi"}], stage="plan")
        assert servers.private_hits == []
    finally:
        servers.close()


def test_the_status_line_never_shows_a_password_in_the_servers_base_url(tmp_path):
    from hugginggpt.config import Settings
    from webui.chat import ChatApp, LLMChoice

    chat = ChatApp(
        Settings(llm_base_url="http://op:pw-secret@127.0.0.1:9/v1", workdir=str(tmp_path / "ws")),
        catalog=Catalog([]),
        endpoint=FakeEndpoint(),
    )
    line = chat.status(LLMChoice())
    assert "127.0.0.1:9/v1" in line and "pw-secret" not in line
