"""A conversation renamed from the sidebar (issue 34), without a browser: the title is cleaned and
bounded, takes a number when another conversation of the browser has it, and is kept on disk."""

from app_support import app_settings
from fakes.endpoints import FakeEndpoint
from test_conversation_store import CATALOG, ask

from webui.chat import titles
from webui.chat.engine import ChatApp
from webui.page import saved


def test_a_typed_title_is_one_bounded_line_of_printable_words():
    assert titles.cleaned("  my\tnew \n title\x00\x1b[31m ") == "my new title [31m"
    assert titles.cleaned(" \n\t ") == ""
    long = titles.cleaned("word " * 40)
    assert len(long) == titles.MAX_TITLE and long.endswith("…")


def test_a_title_another_conversation_has_takes_the_next_free_number():
    assert titles.unique("caption", ["other"]) == "caption"
    assert titles.unique("caption", ["caption"]) == "caption (2)"
    assert titles.unique("caption", ["caption", "caption (2)", "caption (4)"]) == "caption (3)"


def test_a_renamed_conversation_keeps_its_title_after_a_restart(llm_server, tmp_path):
    key = saved.new_key()
    chat = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=FakeEndpoint())
    ask(chat, key, "[conv-title] say hello")
    assert chat.conversations.title(key) == "[conv-title] say hello"
    assert titles.rename(chat.conversations, key, "Greetings")
    assert not titles.rename(chat.conversations, saved.new_key(), "Nobody's")  # no such conversation
    restarted = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=FakeEndpoint())
    assert restarted.conversations.title(key) == "Greetings"
    chat.conversations.drop(key)
    assert not titles.rename(chat.conversations, key, "Too late")  # deleted: nothing to rename
