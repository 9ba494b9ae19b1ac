"""A request keeps running when its page goes away (issue 20): the run belongs to the conversation,
not to the page's stream. Through ChatApp, the fake LLM server and a slow fake endpoint: the stream
is closed mid-run (a reload, a closed tab), and the answer still lands in the conversation and in
its record on disk; a page that comes back follows the run until it ends."""

import json
import threading
import time
from dataclasses import dataclass, field

from app_support import app_settings, photo
from fakes.endpoints import FakeEndpoint, cards

from hugginggpt.catalog import Catalog
from hugginggpt.endpoints import Stopped
from webui.chat import review_chat
from webui.chat.conversations import INTERRUPTED
from webui.chat.engine import ChatApp, LLMChoice
from webui.page import saved

CATALOG = Catalog(
    cards(
        ("org/captioner", "image-to-text", 9),
        ("org/painter", "text-to-image", 3),
        ("org/speaker", "text-to-speech", 2),
    )
)


@dataclass
class GatedEndpoint(FakeEndpoint):
    """The fake endpoint, whose captioner (each run's first task) runs until the test opens the
    gate, or until the run is stopped: a run that goes on exactly as long as the test needs."""

    gate: threading.Event = field(default_factory=threading.Event)
    waiting: threading.Event = field(default_factory=threading.Event)  # the captioner has started

    def run(self, task, model, inputs, call):
        if task == "image-to-text":
            self.waiting.set()
            while not self.gate.wait(0.02):
                if call.stop is not None and call.stop.is_set():
                    self.stopped.append(model.id)
                    raise Stopped(f"{model.id}: stopped")
        return super().run(task, model, inputs, call)


def slow_app(llm_server, workdir, **more) -> tuple[ChatApp, GatedEndpoint]:
    endpoint = GatedEndpoint(duration=0.1)
    return ChatApp(app_settings(llm_server, workdir, **more), catalog=CATALOG, endpoint=endpoint), endpoint


def start_and_leave(chat: ChatApp, endpoint: GatedEndpoint, key: str, text: str, picture) -> None:
    """Sends a request and closes its stream once its first model runs: the page went away."""
    updates = chat.respond(key, {"text": text, "files": [str(picture)]}, LLMChoice())
    next(updates)  # the request has started
    wait_until(endpoint.waiting.is_set)
    updates.close()


def wait_until(condition, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def texts(messages) -> list[str]:
    return [m["content"] for m in messages if isinstance(m.get("content"), str)]


def test_a_browser_run_goes_on_when_its_page_goes_away_and_is_saved_when_it_ends(llm_server, tmp_path):
    key = saved.new_key()
    chat, endpoint = slow_app(llm_server, tmp_path / "ws", app_leave_grace_seconds=0.05)
    start_and_leave(chat, endpoint, key, "[conv-kept] caption this", photo(tmp_path / "a.png"))
    conv = chat.conversations.find(key)
    assert conv.cancel is not None and not conv.cancel.is_set()  # still running, not stopped
    chat.conversations.leave(key)  # as the page's unload does
    time.sleep(0.3)  # past the leave grace: a running conversation stays in memory all the same
    assert chat.conversations.find(key) is conv and chat.slots.running == 1  # it holds its slot

    endpoint.gate.set()  # the first model may finish now
    updates = list(chat.live(key).follow())  # a page that comes back follows it until it ends
    assert all(running for _, _, running in updates[:-1]) and not updates[-1][2]
    assert texts(updates[-1][0])[-1].startswith("Answer for conv-kept")
    assert "Stopped." not in texts(conv.display)
    assert texts(conv.display)[-1].startswith("Answer for conv-kept") and len(conv.history) == 2
    assert conv.cancel is None and conv.run is None and len(conv.traces) == 1
    wait_until(lambda: chat.slots.running == 0)  # the slot is given back
    wait_until(lambda: key not in list(chat.conversations))  # and now it leaves memory

    [record] = (tmp_path / "ws" / "conversations").glob("*.json")
    assert "Answer for conv-kept" in json.dumps(json.loads(record.read_text())["display"])
    restarted, _ = slow_app(llm_server, tmp_path / "ws")  # as after an app restart
    assert texts(restarted.conversations.find(key).display)[-1].startswith("Answer for conv-kept")
    assert restarted.live(key) is None  # nothing runs in it


def test_stop_and_delete_still_end_a_run_nobody_watches(llm_server, tmp_path):
    chat, endpoint = slow_app(llm_server, tmp_path / "ws")
    stopped, deleted = saved.new_key(), saved.new_key()
    start_and_leave(chat, endpoint, stopped, "[conv-stop] caption", photo(tmp_path / "a.png"))
    run = chat.live(stopped)
    assert chat.stop(stopped)
    *_, (messages, _, running) = run.follow()
    assert texts(messages)[-1] == "Stopped." and not running
    endpoint.waiting.clear()
    start_and_leave(chat, endpoint, deleted, "[conv-deleted] caption", photo(tmp_path / "b.png"))
    conv = chat.conversations.find(deleted)
    chat.drop(deleted)
    wait_until(lambda: conv.cancel is None)
    assert not [
        r for r in (tmp_path / "ws" / "conversations").glob("*.json") if b"conv-deleted" in r.read_bytes()
    ]
    wait_until(lambda: chat.slots.running == 0)


def test_an_api_clients_run_still_ends_with_its_stream(llm_server, tmp_path):
    chat, endpoint = slow_app(llm_server, tmp_path / "ws")
    start_and_leave(chat, endpoint, "a-gradio-session-hash", "[conv-api] caption", photo(tmp_path / "a.png"))
    conv = chat.conversations.find("a-gradio-session-hash")
    assert conv.cancel is None and texts(conv.display)[-1] == "Stopped."
    wait_until(lambda: chat.slots.running == 0)
    assert endpoint.stopped == ["org/captioner"] and not endpoint.calls  # stopped; nothing ran after


def test_a_request_cut_off_by_a_restart_says_so_and_retry_runs_it_again(llm_server, tmp_path):
    key = saved.new_key()
    chat, endpoint = slow_app(llm_server, tmp_path / "ws")
    start_and_leave(chat, endpoint, key, "[conv-cut] caption this", photo(tmp_path / "a.png"))

    # A new process on the same folder while the first is still mid-run: as after a crash or a restart.
    restarted, _ = slow_app(llm_server, tmp_path / "ws")
    conv = restarted.conversations.find(key)
    assert texts(conv.display)[-2:] == ["[conv-cut] caption this", INTERRUPTED]
    assert conv.cancel is None and conv.last_run is None and len(conv.turns) == 1

    message = review_chat.request_of(restarted, key, 0)  # what the page's retry icon sends
    restarted.backends.endpoint.gate.set()
    *_, (messages, _, running) = restarted.respond(key, message, LLMChoice(), replace=0)
    assert not running and texts(messages)[-1].startswith("Answer for conv-cut")
    [note] = [m for m in messages if m["content"] == INTERRUPTED]
    assert note["metadata"]["parent_id"].startswith("version-")  # done again in place: the note folded
    assert restarted.conversations.store.load(key)["running"] is False
    endpoint.gate.set()  # let the first process's run end
