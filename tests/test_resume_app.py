"""The app's side of resume: a request a restart cut off is continued once when the app starts,
or by the Continue option under its note; a run that died while being continued is not continued
automatically again. Two ChatApps on one folder stand for the app before and after a restart."""

import json
import threading
from dataclasses import dataclass, field

from app_support import app_settings, photo
from fakes.endpoints import FakeEndpoint
from test_live_runs import CATALOG, texts, wait_until

from hugginggpt.endpoints import Stopped
from hugginggpt.run.journal import journals
from webui.chat import interrupted, resume_runs
from webui.chat.engine import ChatApp, LLMChoice
from webui.page import message_actions, saved


@dataclass
class SpeechGated(FakeEndpoint):
    """Each run's last task (text-to-speech) waits for the gate: the tasks before it have finished."""

    gate: threading.Event = field(default_factory=threading.Event)
    waiting: threading.Event = field(default_factory=threading.Event)

    def run(self, task, model, inputs, call):
        if task == "text-to-speech":
            self.waiting.set()
            while not self.gate.wait(0.02):
                if call.stop is not None and call.stop.is_set():
                    raise Stopped(f"{model.id}: stopped")
        return super().run(task, model, inputs, call)


def app(llm_server, workdir, endpoint):
    return ChatApp(app_settings(llm_server, workdir, cache_max_bytes=0), catalog=CATALOG, endpoint=endpoint)


def cut_off(llm_server, tmp_path, tag):
    """A request whose run is mid-way (its caption done, its speech waiting) in an app that then
    'restarts': a second app on the same folder, while the first one is still stuck."""
    key = saved.new_key()
    first = SpeechGated()
    chat = app(llm_server, tmp_path / "ws", first)
    updates = chat.respond(
        key, {"text": f"[{tag}] caption this", "files": [str(photo(tmp_path / "a.png"))]}, LLMChoice()
    )
    next(updates)
    wait_until(first.waiting.is_set)
    updates.close()
    root = chat.conversations.find(key).workspace.root
    wait_until(lambda: '"e": "finished", "id": 0' in journals(root)[-1].read_text())
    return key, first


def test_a_cut_off_run_is_continued_on_start_and_its_finished_tasks_do_not_run_again(llm_server, tmp_path):
    key, first = cut_off(llm_server, tmp_path, "conv-resumed")
    after = FakeEndpoint()
    restarted = app(llm_server, tmp_path / "ws", after)
    assert resume_runs.resume_on_start(restarted) == 1
    conv = restarted.conversations.find(key)  # the page comes back: it finds the run going or done
    wait_until(lambda: conv.cancel is None)
    assert "org/captioner" not in [model for _, model, _ in after.calls]  # from the journal
    assert "org/speaker" in [model for _, model, _ in after.calls]
    shown = texts(conv.display)
    assert shown[-1].startswith("Answer for conv-resumed") and interrupted.RESUMABLE not in shown
    assert any("from before the restart" in str(m["content"]) for m in conv.display)
    assert any("continued after 1 restart" in str(m.get("metadata")) for m in conv.display)
    # the run's thread frees the conversation, then saves it: the record follows a moment later
    wait_until(lambda: restarted.conversations.store.load(key)["running"] is False)
    record = restarted.conversations.store.load(key)
    assert record["running"] is False and record["display"][-1]["content"].startswith("Answer for")
    first.gate.set()


def test_the_continue_option_takes_the_run_up_in_place(llm_server, tmp_path):
    key, first = cut_off(llm_server, tmp_path, "conv-continue")
    after = FakeEndpoint()
    restarted = app(llm_server, tmp_path / "ws", after)  # resume_on_start off: nothing started
    conv = restarted.conversations.find(key)
    assert texts(conv.display)[-1] == interrupted.RESUMABLE
    assert message_actions.options(conv) == [{"label": "▶ Continue", "value": message_actions.CONTINUE}]
    *_, (messages, _, running) = resume_runs.continue_run(restarted, key, LLMChoice())
    assert not running and texts(messages)[-1].startswith("Answer for conv-continue")
    assert interrupted.RESUMABLE not in texts(messages) and len(conv.turns) == 1
    assert "org/captioner" not in [model for _, model, _ in after.calls]
    assert message_actions.options(conv) != [{"label": "▶ Continue", "value": message_actions.CONTINUE}]
    first.gate.set()


def test_a_run_that_died_while_being_continued_is_not_continued_again_on_start(llm_server, tmp_path):
    key, first = cut_off(llm_server, tmp_path, "conv-twice")
    second = SpeechGated()
    restarted = app(llm_server, tmp_path / "ws", second)
    assert resume_runs.resume_on_start(restarted) == 1
    wait_until(second.waiting.is_set)  # the continued run is mid-way when the app dies again

    third = app(llm_server, tmp_path / "ws", FakeEndpoint())
    assert resume_runs.resume_on_start(third) == 0
    conv = third.conversations.find(key)
    assert texts(conv.display)[-1] == interrupted.AGAIN
    assert message_actions.options(conv)[0]["value"] == message_actions.CONTINUE  # a person may still
    starts = [json.loads(j.read_text().splitlines()[0]) for j in journals(conv.workspace.root)]
    assert sorted(s["crashes"] for s in starts) == [0, 1]  # the continued run's journal says so
    first.gate.set()
    second.gate.set()


def test_a_continued_run_charges_the_visitors_tokens_only_for_its_new_calls(llm_server, tmp_path):
    key, first = cut_off(llm_server, tmp_path, "conv-budget")
    settings = app_settings(llm_server, tmp_path / "ws", cache_max_bytes=0, visitor_daily_tokens=10**6)
    restarted = ChatApp(settings, catalog=CATALOG, endpoint=FakeEndpoint(), public_llm_only=True)
    conv = restarted.conversations.get(key, "10.0.0.7")  # the visitor's page comes back
    assert conv.resumable is not None
    *_, (messages, _, running) = resume_runs.continue_run(restarted, key, LLMChoice())
    assert not running and texts(messages)[-1].startswith("Answer for conv-budget")
    trace = json.loads(sorted((conv.workspace.root / "traces").glob("*.json"))[-1].read_text())
    assert trace["crashes"] == 1
    new_calls = sum(c["usage"]["prompt_tokens"] + c["usage"]["completion_tokens"] for c in trace["llm_calls"])
    assert [c["stage"] for c in trace["llm_calls"]] == ["respond"]  # the plan and choice were journaled
    assert restarted.host.tokens.spent("10.0.0.7") == new_calls > 0
    assert trace["usage"]["total_tokens"] > new_calls  # the usage shown still counts both attempts
    assert trace["usage"]["by_stage"]["plan"]["input_tokens"] > 0  # the first attempt's plan
    first.gate.set()
