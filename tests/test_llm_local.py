"""The in-process controller LLM, on a tiny random-weight chat model built by the tests."""

import json

import pytest

from hugginggpt.config import Settings
from hugginggpt.factory import build_llm
from hugginggpt.llms.interface import LLMError
from hugginggpt.llms.local import LocalChatLLM
from hugginggpt.stages.planner import make_plan

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world"}]


def test_no_server_configured_means_a_local_model():
    llm = build_llm(Settings(llm_model="some/local-model"))
    assert isinstance(llm, LocalChatLLM) and llm.describe() == "some/local-model (local transformers)"
    assert not isinstance(build_llm(Settings(llm_base_url="http://127.0.0.1:1/v1")), LocalChatLLM)


def test_local_model_completes_and_streams_with_token_counts(tiny):
    llm = LocalChatLLM(tiny("llama-chat"), max_new_tokens=8)
    completion = llm.complete(MESSAGES, stage="plan", schema={"type": "object"})
    pieces = list(llm.stream(MESSAGES, stage="respond"))
    assert completion.text == llm.calls[0].reply and completion.cut is None
    assert "".join(pieces) == llm.calls[1].reply
    assert completion.usage == llm.calls[0].usage
    assert [c.stage for c in llm.calls] == ["plan", "respond"]
    assert llm.calls[0].usage.prompt_tokens > 5 and llm.calls[1].usage.completion_tokens <= 8
    # With a schema the reply is JSON of it (a grammar), given room for its smallest reply.
    assert isinstance(json.loads(completion.text), dict) and completion.json_mode
    assert not llm.calls[1].json_mode


def test_local_model_output_goes_through_the_planner_without_crashing(tiny):
    # Random weights write noise; under the plan's grammar, with a budget too small for any task,
    # the grammar closes the JSON at once: the empty plan, read in one attempt.
    outcome = make_plan(LocalChatLLM(tiny("llama-chat"), max_new_tokens=6), "draw a cat", max_retries=1)
    assert outcome.attempts == 1 and outcome.plan is not None and outcome.plan.tasks == []
    assert outcome.replies == ['{"tasks": []}']
    # Without the grammar (a model it cannot be built for) noise is a clear error, not a crash.
    noise = make_plan(_Unconstrained(tiny("llama-chat"), max_new_tokens=6), "draw a cat", max_retries=1)
    assert noise.attempts == 2 and noise.plan is None
    assert noise.error.startswith("No valid plan after 2 attempts") and len(noise.problems) == 2


class _Unconstrained(LocalChatLLM):
    def _stream(self, messages, schema, max_tokens, hang_up):
        return super()._stream(messages, None, max_tokens, hang_up)


def test_missing_local_model_is_a_clear_error(tmp_path):
    llm = LocalChatLLM(str(tmp_path / "nothing-here"))
    with pytest.raises(LLMError, match="could not be loaded"):
        llm.complete(MESSAGES, stage="plan")


def test_closing_the_stream_stops_local_generation(tiny):
    import threading
    import time

    llm = LocalChatLLM(tiny("llama-chat"), max_new_tokens=100_000)
    stream = llm.stream(MESSAGES, stage="respond")
    next(stream)  # the answer started; then the person pressed Stop
    stream.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(t.name == "local-llm-generate" for t in threading.enumerate()):
        time.sleep(0.05)
    assert not any(t.name == "local-llm-generate" for t in threading.enumerate())


def test_a_local_model_without_a_chat_template_is_a_clear_error(tiny):
    llm = LocalChatLLM(tiny("gpt2"), max_new_tokens=4)  # a base model: no chat template
    with pytest.raises(LLMError, match="chat template"):
        llm.complete(MESSAGES, stage="plan")
    with pytest.raises(LLMError, match="chat template"):
        list(llm.stream(MESSAGES, stage="respond"))
