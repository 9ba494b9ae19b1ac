"""A public app's daily LLM token budget per visitor: spent in the chat, refused there and at the
OpenAI-compatible API with a clear message; renewed the next day."""

from __future__ import annotations

import httpx
import pytest
from app_support import app_settings, fake_catalog, photo, running_app
from fakes.endpoints import FakeEndpoint
from gradio_client import Client, handle_file

from webui.host.token_budget import BudgetSpent, DailyTokens


def chat(url: str, text: str, image=None) -> str:
    files = [handle_file(str(image))] if image else []
    messages, _, _ = (
        Client(url, verbose=False)
        .submit({"text": text, "files": files}, "", "", "", "local", 5, False, api_name="/chat")
        .result()
    )
    return "\n".join(str(part.get("text", "")) for m in messages for part in m["content"])


def test_a_visitor_who_spent_the_days_tokens_is_told_so_in_the_chat_and_the_api(llm_server, tmp_path):
    settings = app_settings(llm_server, tmp_path / "ws", api_keys=("k",), visitor_daily_tokens=4000)
    with running_app(settings, catalog=fake_catalog(), endpoint=FakeEndpoint(), public_llm_only=True) as demo:
        first = chat(demo.local_url, "caption this", photo(tmp_path / "a.png"))
        assert "Answer for you" in first
        assert demo.chat_app.host.tokens.spent("127.0.0.1") > 0
        while "today's share" not in (said := chat(demo.local_url, "caption this again")):
            assert "Answer for you" in said  # each request runs whole while its calls fit the budget
        assert "You have used today's share of this app's LLM (4,000 tokens a day)" in said
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
    first = budget.reserve("1.2.3.4", 50)  # a call starts while some tokens are free
    assert "still running" in (budget.refusal("1.2.3.4") or "")
    with pytest.raises(BudgetSpent, match="still running"):  # a second call is not let in past it
        budget.reserve("1.2.3.4", 1)
    budget.settle(first, 12)
    budget.settle(first, 12)  # settled once
    assert budget.spent("1.2.3.4") == 12 and budget.refusal("5.6.7.8") is None
    assert "You have used" in (budget.refusal("1.2.3.4") or "")
    day[0] = "2026-12-04"
    assert budget.refusal("1.2.3.4") is None and budget.spent("1.2.3.4") == 0
    off = DailyTokens(0)
    off.settle(off.reserve("1.2.3.4", 10**9), 10**9)
    assert off.refusal("1.2.3.4") is None
