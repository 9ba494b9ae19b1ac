"""A public app's daily LLM token budget per visitor: spent in the chat, refused there and at the
OpenAI-compatible API with a clear message; renewed the next day."""

from __future__ import annotations

import httpx
from app_support import app_settings, fake_catalog, photo, running_app
from fakes.endpoints import FakeEndpoint
from gradio_client import Client, handle_file

from hugginggpt.events import Done, Outcome, Usage
from webui.token_budget import DailyTokens


def chat(url: str, text: str, image=None) -> str:
    files = [handle_file(str(image))] if image else []
    messages, _, _ = (
        Client(url, verbose=False)
        .submit({"text": text, "files": files}, "", "", "", "local", 5, False, api_name="/chat")
        .result()
    )
    return "\n".join(str(part.get("text", "")) for m in messages for part in m["content"])


def test_a_visitor_who_spent_the_days_tokens_is_told_so_in_the_chat_and_the_api(llm_server, tmp_path):
    settings = app_settings(llm_server, tmp_path / "ws", api_keys=("k",), visitor_daily_tokens=100)
    with running_app(settings, catalog=fake_catalog(), endpoint=FakeEndpoint(), public_llm_only=True) as demo:
        first = chat(demo.local_url, "caption this", photo(tmp_path / "a.png"))
        assert "Answer for you" in first
        assert demo.chat_app.host.tokens.spent("127.0.0.1") > 100
        second = chat(demo.local_url, "caption this again")
        assert "You have used today's share of this app's LLM (100 tokens a day)" in second
        reply = httpx.post(
            demo.local_url.rstrip("/") + "/v1/chat/completions",
            headers={"Authorization": "Bearer k"},
            json={"model": "hugginggpt", "messages": [{"role": "user", "content": "hello"}]},
            trust_env=False,
            timeout=30,
        )
    assert reply.status_code == 429 and "today's share" in reply.json()["error"]["message"]


def test_the_budget_renews_each_day_and_is_off_at_zero():
    day = ["2026-12-03"]
    budget = DailyTokens(10, today=lambda: day[0])
    done = Done(Outcome.ANSWERED, usage=Usage(prompt_tokens=10, completion_tokens=2))
    list(budget.counted("1.2.3.4", iter([done])))
    assert budget.refusal("1.2.3.4") and budget.refusal("5.6.7.8") is None
    day[0] = "2026-12-04"
    assert budget.refusal("1.2.3.4") is None and budget.spent("1.2.3.4") == 0
    off = DailyTokens(0)
    list(off.counted("1.2.3.4", iter([done])))
    assert off.refusal("1.2.3.4") is None
