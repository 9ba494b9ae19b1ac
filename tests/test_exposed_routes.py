"""What the app serves to anyone who asks, beyond the page and its doors: nothing of its traffic."""

from __future__ import annotations

import httpx
from app_support import app_settings, fake_catalog, running_app
from fakes.endpoints import FakeEndpoint


def test_gradios_monitoring_is_off(llm_server, tmp_path):
    settings = app_settings(llm_server, tmp_path / "ws")
    with running_app(settings, catalog=fake_catalog(), endpoint=FakeEndpoint(), public_llm_only=True) as demo:
        base = demo.local_url.rstrip("/")
        statuses = [
            httpx.get(f"{base}{path}", trust_env=False, timeout=10).status_code
            for path in ("/monitoring/summary", "/gradio_api/monitoring/summary", "/monitoring")
        ]
    print(f"/monitoring: {statuses}")
    assert 200 not in statuses  # before: the summary's traffic figures, without the metrics key
