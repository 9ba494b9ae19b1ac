"""models_local.chat: the in-process chat model behind the local controller LLM, on tiny models."""

import logging
import threading

import pytest

from models_local.chat import ChatLoadFailed, ChatModel, NoChatTemplate

MESSAGES = [{"role": "user", "content": "hello world"}]


def test_loads_once_streams_and_counts_tokens(tiny, caplog):
    chat = ChatModel(tiny("llama-chat"), max_new_tokens=8)
    with caplog.at_level(logging.INFO, logger="models_local"):
        assert chat.load() is chat.load()
    (loaded,) = [r.getMessage() for r in caplog.records if "loaded chat model" in r.getMessage()]
    assert " MiB)" in loaded and " s (" in loaded
    reply = chat.reply(MESSAGES)
    pieces = list(reply)
    assert all(isinstance(p, str) and p for p in pieces)
    assert reply.prompt_tokens > 3 and 1 <= reply.completion_tokens <= 8


def test_a_stop_signal_ends_generation_at_the_next_token(tiny):
    chat = ChatModel(tiny("llama-chat"), max_new_tokens=2000)
    chat.load()[1].generation_config.eos_token_id = None  # random weights must not end it by chance
    stop = threading.Event()
    reply = chat.reply(MESSAGES, stop=stop)
    read = 0
    for _ in reply:  # the stream ends by itself once the signal is seen, long before 2,000 tokens
        read += 1
        stop.set()
    assert read >= 1 and reply.completion_tokens < 50


def test_missing_model_and_missing_chat_template_are_typed_errors(tiny, tmp_path):
    with pytest.raises(ChatLoadFailed):
        ChatModel(str(tmp_path / "nothing-here")).reply(MESSAGES)
    with pytest.raises(NoChatTemplate, match="chat template"):
        ChatModel(tiny("gpt2")).reply(MESSAGES)  # a base model
