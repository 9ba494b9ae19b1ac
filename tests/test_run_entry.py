"""Every way a visitor's run starts goes through the one entry (webui.host.run_entry): the chat, a re-run
action, continuing a cut-off run, the OpenAI API's and MCP's calls (webui.doors.calls). Each run is started
under a slot taken by the entry, with its LLM calls reserved in the token ledger. The real chat logic
and the real openai client against the fake LLM server on 127.0.0.1."""

from __future__ import annotations

import base64
import sys
import threading

import pytest
from app_support import app_settings, fake_catalog, photo
from fakes.endpoints import FakeEndpoint
from test_live_runs import wait_until
from test_resume_app import app, cut_off

from hugginggpt.run.events import Done
from hugginggpt.run.pipeline import Pipeline
from webui.chat import resume_runs, review_chat
from webui.chat.engine import ChatApp, LLMChoice
from webui.doors.calls import Calls, Credentials
from webui.host import run_entry
from webui.host.slots import RunSlots
from webui.host.token_budget import DailyTokens

VISITOR = "10.0.0.7"


class Starts:
    """What each path did: runs started (and whether through the entry), slots taken, reservations."""

    def __init__(self, monkeypatch):
        self.runs: list[tuple[str, bool]] = []
        self.slots = self.reserved = 0
        for name in ("run", "rerun", "plan_only", "run_plan"):
            monkeypatch.setattr(Pipeline, name, self._spy(name, getattr(Pipeline, name)))
        monkeypatch.setattr(resume_runs, "resume", self._spy("resume", resume_runs.resume))
        acquire, reserve = RunSlots.acquire, DailyTokens.reserve

        def counted_acquire(slots, *a, **kw):
            got = acquire(slots, *a, **kw)
            self.slots += got
            return got

        def counted_reserve(tokens, *a, **kw):
            self.reserved += 1
            return reserve(tokens, *a, **kw)

        monkeypatch.setattr(RunSlots, "acquire", counted_acquire)
        monkeypatch.setattr(DailyTokens, "reserve", counted_reserve)

    def _spy(self, name, method):
        def spy(*args, **kwargs):
            if sys._getframe(1).f_globals["__name__"].startswith("webui."):  # a door or action starts it
                self.runs.append((name, run_entry.started_here()))
            return method(*args, **kwargs)

        return spy

    def since(self, before: tuple[int, int, int]) -> tuple[list[tuple[str, bool]], int, int]:
        runs, slots, reserved = before
        return self.runs[runs:], self.slots - slots, self.reserved - reserved

    def mark(self) -> tuple[int, int, int]:
        return len(self.runs), self.slots, self.reserved


@pytest.fixture
def starts(monkeypatch):
    return Starts(monkeypatch)


def test_the_chat_a_rerun_and_the_api_doors_start_their_runs_through_the_entry(llm_server, tmp_path, starts):
    settings = app_settings(llm_server, tmp_path / "ws", visitor_daily_tokens=10**6)
    chat = ChatApp(settings, catalog=fake_catalog(), endpoint=FakeEndpoint(), public_llm_only=True)
    image = str(photo(tmp_path / "a.png"))

    mark = starts.mark()
    *_, (messages, _, _) = chat.respond(
        "s1", {"text": "caption this", "files": [image]}, LLMChoice(), client=VISITOR
    )
    runs, slots, reserved = starts.since(mark)
    assert runs == [("run", True)] and slots == 1 and reserved >= 2  # the uploads are checked under the run's
    assert "Answer for" in str(messages[-1]["content"])

    mark = starts.mark()
    *_, (messages, _, _) = review_chat.regenerate(chat, "s1", [], LLMChoice())
    runs, slots, reserved = starts.since(mark)
    assert runs == [("rerun", True)] and slots == 1 and reserved >= 1

    calls = Calls(chat.host)
    for call in (
        lambda cancel: calls.pipeline_call(
            "caption this", [], Credentials(), root_url="http://x/", cancelled=cancel, caller=VISITOR
        ),
        lambda cancel: calls.task_call(
            "image-to-text",
            {"image": base64.b64encode(photo(tmp_path / "b.png").read_bytes()).decode()},
            model=None,
            root_url="http://x/",
            cancelled=cancel,
            caller=VISITOR,
        ),
    ):
        mark = starts.mark()
        items = list(call(threading.Event()))
        runs, slots, reserved = starts.since(mark)
        assert isinstance(items[-1].done, Done) and slots == 1
        assert [entered for _, entered in runs] == [True]
    assert reserved == 0  # the one-task call asks no LLM

    mark = starts.mark()  # a run started beside the entry is seen: the check above can fail
    beside = chat.pipeline_for(LLMChoice(), VISITOR)
    list(run_beside(beside, chat.find("s1").workspace))
    assert starts.since(mark)[0] == [("run", False)]


def test_the_chat_decodes_uploads_under_its_run_s_one_slot_and_keeps_no_refused_file(
    llm_server, tmp_path, starts
):
    """A chat message's files are checked (decoded) by its run, under the run's slot, as a door's
    are: one slot, no second one of the chat's own; a refused file is not kept for later plans."""
    chat = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=fake_catalog(), endpoint=FakeEndpoint())
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    good = photo(tmp_path / "good.png")
    mark = starts.mark()
    message = {"text": "caption this", "files": [str(broken), str(good)]}
    *_, (messages, _, running) = chat.respond("s1", message, LLMChoice(), client=VISITOR)
    runs, slots, _ = starts.since(mark)
    assert runs == [] and slots == 1 and not running  # the pipeline never started
    said = str(messages[-1]["content"])
    assert "'broken.png' was not used" in said and "Nothing was run" in said
    assert set(chat.find("s1").workspace.files()) == {"good.png"}
    wait_until(lambda: chat.slots.running == 0)


def test_continuing_a_cut_off_run_starts_it_through_the_entry(llm_server, tmp_path, starts):
    key, first = cut_off(llm_server, tmp_path, "entry")
    restarted = app(llm_server, tmp_path / "ws", FakeEndpoint())
    mark = starts.mark()
    *_, (messages, _, running) = resume_runs.continue_run(restarted, key, LLMChoice())
    runs, slots, _ = starts.since(mark)
    assert runs == [("resume", True)] and slots == 1 and not running
    wait_until(lambda: restarted.slots.running == 0)
    first.gate.set()


def run_beside(pipeline, workspace):
    """A run started the way the paths did before the entry: called from a webui module."""
    where = {"__name__": "webui.beside", "pipeline": pipeline, "workspace": workspace}
    return eval("pipeline.run('caption this', workspace=workspace)", where)
