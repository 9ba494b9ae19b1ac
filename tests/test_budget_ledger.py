"""Every controller-LLM call of a public app's visitor is charged before it is made (webui.host.token_budget,
webui.host.charged_llm), on every path: parallel chat requests, the re-run actions, stopped answers. The
real chat logic and the real openai client against the fake LLM server on 127.0.0.1."""

from __future__ import annotations

import threading
import time

from app_support import app_settings, fake_catalog, photo
from fakes.endpoints import FakeEndpoint
from fakes.llm_server import Reply

from webui.chat import review_chat
from webui.chat.engine import ChatApp, LLMChoice

BUDGET = 3000
VISITOR = "10.0.0.1"


def public_chat(llm_server, tmp_path, budget: int = BUDGET) -> ChatApp:
    settings = app_settings(
        llm_server,
        tmp_path / "ws",
        visitor_daily_tokens=budget,
        llm_max_reply_chars=3000,  # so one call's estimate is about 1,000 reply tokens plus its prompt
        answer_max_tokens=500,
    )
    return ChatApp(settings, catalog=fake_catalog(), endpoint=FakeEndpoint(), public_llm_only=True)


def ask(chat: ChatApp, session: str, image, text: str = "caption this") -> list[dict]:
    *_, (messages, _, _) = chat.respond(
        session, {"text": text, "files": [str(image)]}, LLMChoice(), client=VISITOR
    )
    return messages


def said(messages: list[dict]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages)


def test_eight_parallel_requests_overspend_by_at_most_one_calls_estimate(llm_server, tmp_path, monkeypatch):
    monkeypatch.setattr(
        llm_server, "latency", 0.3
    )  # each call takes a while, so the eight requests' calls overlap
    chat = public_chat(llm_server, tmp_path)
    asked = len(llm_server.requests)
    image = photo(tmp_path / "a.png")
    threads = [threading.Thread(target=ask, args=(chat, f"s{i}", image)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    spent = chat.host.tokens.spent(VISITOR)
    calls = len(llm_server.requests) - asked
    print(f"8 parallel: {calls} LLM calls, {spent} tokens against {BUDGET}")
    # Before: every request ran its three calls (24), charged at its end: 11,568 tokens (3.9x).
    assert calls <= 3
    assert spent <= BUDGET + 3600  # one call's estimate: a plan's prompt (2,516) and reply bound (1,000)


def test_six_retries_after_the_budget_is_spent_make_no_llm_call(llm_server, tmp_path):
    chat = public_chat(llm_server, tmp_path)
    image = photo(tmp_path / "a.png")
    while not chat.host.tokens.refusal(VISITOR):  # spend the day's tokens in one conversation
        ask(chat, "s1", image)
    asked = len(llm_server.requests)
    notes = []
    for _ in range(6):  # the retry icon: the last run again, its answer written anew
        *_, (messages, _, _) = review_chat.regenerate(chat, "s1", [], LLMChoice())
        notes.append(said(messages[-1:]))
    print(f"6 retries: {len(llm_server.requests) - asked} LLM calls")
    assert len(llm_server.requests) == asked  # before: six answers written, 6 more calls
    assert all("today's share of this app's LLM (3,000 tokens a day)" in n for n in notes)


def test_a_stopped_answer_is_charged_its_estimate(llm_server, tmp_path, monkeypatch):
    chat = public_chat(llm_server, tmp_path, budget=100_000)
    slow = llm_server.responder

    def respond_slowly(stage, body):
        if stage == "respond":
            return Reply("word " * 400, chunk_delay=0.05)
        return slow(stage, body)

    monkeypatch.setattr(llm_server, "responder", respond_slowly)
    image = photo(tmp_path / "a.png")
    asked = len(llm_server.requests)
    run = chat.respond("s1", {"text": "caption", "files": [str(image)]}, LLMChoice(), client=VISITOR)
    for messages, _, _ in run:
        if any("word word" in str(m.get("content", "")) for m in messages):
            chat.stop("s1")  # Stop, during the answer: the server never reports the answer's usage
            break
    for _ in run:
        pass
    deadline = time.monotonic() + 10
    while chat.find("s1").cancel is not None and time.monotonic() < deadline:  # the run winds down
        time.sleep(0.05)
    spent = chat.host.tokens.spent(VISITOR)
    plan = sum(
        len(m["content"].split()) for m in llm_server.requests[asked]["messages"]
    )  # as the fake counts
    print(f"stopped answer: {spent} tokens charged, the plan's prompt {plan}")
    assert spent >= plan + 500  # and the answer's bound (answer_max_tokens); before: the plan's only
