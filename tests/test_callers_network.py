"""Callers by network: 25 addresses of one IPv6 /64 are one caller for every per-caller cap; a
message that runs nothing takes no conversation place; a full table lets go of conversations that
never ran a request first. The real chat logic and its admission (webui.host.host), the fake LLM server."""

from __future__ import annotations

import time

import pytest
from app_support import app_settings, fake_catalog
from fakes.endpoints import FakeEndpoint

from webui.chat.conversations import TableFull
from webui.chat.engine import ChatApp, LLMChoice
from webui.host.callers import Callers

HOUSEHOLD = [f"2001:db8:1:2::{n:x}" for n in range(1, 26)]  # 25 addresses in one /64


def public_chat(llm_server, tmp_path, **more) -> ChatApp:
    settings = app_settings(llm_server, tmp_path / "ws", trusted_proxies=("127.0.0.1",), **more)
    return ChatApp(settings, catalog=fake_catalog(), endpoint=FakeEndpoint(), public_llm_only=True)


def test_an_ipv6_caller_is_its_64_network_and_the_prefix_is_a_setting():
    callers = Callers(("127.0.0.1",))
    assert {callers.address("127.0.0.1", [a]) for a in HOUSEHOLD} == {"2001:db8:1:2::/64"}
    assert callers.address("2001:db8:1:3::9") == "2001:db8:1:3::/64"
    assert callers.address("::ffff:10.1.2.3") == "10.1.2.3" and callers.address("10.1.2.3") == "10.1.2.3"
    assert Callers(ipv6_prefix=128).address("2001:db8::1") == "2001:db8::1/128"


def test_25_addresses_in_one_64_share_one_callers_conversations(llm_server, tmp_path):
    chat = public_chat(llm_server, tmp_path)
    admitted = 0
    for address in HOUSEHOLD:
        client = chat.host.callers.address("127.0.0.1", [address])  # behind the declared proxy
        for n in range(20):
            try:
                chat.conversation(f"{address}-{n}", client)
                admitted += 1
            except TableFull:
                pass
    print(f"\n25 addresses x 20 in one /64: {admitted} conversations")
    assert admitted == 20  # before: 500, the whole table


def test_empty_messages_take_no_conversation_place(llm_server, tmp_path):
    chat = public_chat(llm_server, tmp_path)
    for n in range(20):
        *_, (messages, _, running) = chat.respond(
            f"s{n}", {"text": "  ", "files": []}, LLMChoice(), client="10.0.0.7"
        )
        assert messages == [] and not running
    print(f"20 empty messages: {len(chat.conversations)} conversations")
    assert len(chat.conversations) == 0  # before: 20


def test_a_refused_first_message_takes_no_place(llm_server, tmp_path):
    chat = public_chat(llm_server, tmp_path, visitor_daily_tokens=10)
    chat.host.tokens.settle(chat.host.tokens.reserve("10.0.0.7", 10), 10)  # the day's tokens spent
    *_, (messages, _, _) = chat.respond("s1", "hello", LLMChoice(), client="10.0.0.7")
    assert "today's share" in messages[-1]["content"] and len(chat.conversations) == 0


def test_a_full_table_lets_go_of_conversations_that_never_ran_first(llm_server, tmp_path):
    settings = app_settings(llm_server, tmp_path / "ws")
    chat = ChatApp(settings, catalog=fake_catalog(), endpoint=FakeEndpoint(), max_conversations=2)
    list(chat.respond("ran", "hello", LLMChoice(), client="10.0.0.1"))
    chat.conversation("idle", "10.0.0.2")  # made (a trace opened for review, say), never ran
    chat.conversations.clock = lambda: time.monotonic() + 600  # ten minutes on: past the leave grace
    chat.conversation("newcomer", "10.0.0.3")  # before: TableFull, for the idle hour
    assert chat.find("ran") and chat.find("idle") is None and chat.find("newcomer")
    list(chat.respond("newcomer", "hello", LLMChoice(), client="10.0.0.3"))
    with pytest.raises(TableFull):  # conversations that ran are never pushed out
        chat.conversation("late", "10.0.0.4")
