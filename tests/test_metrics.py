"""Prometheus metrics at /metrics on the app's port (HUGGINGGPT_METRICS=1) and on the expert server:
scraped after a chat request and an OpenAI-API request, with the labels an operator filters by."""

from __future__ import annotations

import base64
import re

import httpx
import openai
import pytest
from app_support import app_settings, fake_catalog, photo, running_app
from fakes.endpoints import FakeEndpoint
from gradio_client import Client, handle_file
from prometheus_client.parser import text_string_to_metric_families
from serve_support import protocol_server

from models_local.serve import LocalBackend, ServerSettings, create_app

KEY = "metrics-key"


def scrape(url: str, key: str | None = KEY) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    reply = httpx.get(f"{url.rstrip('/')}/metrics", headers=headers, trust_env=False)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(reply.text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture(scope="module")
def metered_app(llm_server, tmp_path_factory):
    settings = app_settings(
        llm_server,
        tmp_path_factory.mktemp("metrics_ws"),
        api_keys=("api-key",),
        metrics=True,
        metrics_key=KEY,
        llm_input_price=1.5,
        llm_output_price=6.0,
    )
    with running_app(settings, catalog=fake_catalog(), endpoint=FakeEndpoint(duration=0.05)) as demo:
        yield demo


def chat_request(url: str, image) -> None:
    client = Client(url, verbose=False)
    message = {"text": "caption this, draw it and read it aloud", "files": [handle_file(str(image))]}
    messages, _, _ = client.submit(message, "", "", "", "local", 5, False, api_name="/chat").result()
    titles = [str((m.get("metadata") or {}).get("title") or "") for m in messages]
    assert any(re.search(r"^3 tasks · .* · [\d,]+ tokens · cost 0\.\d+$", t) for t in titles), titles


def api_request(url: str, image) -> None:
    data = "data:image/png;base64," + base64.b64encode(image.read_bytes()).decode()
    content = [{"type": "text", "text": "caption this"}, {"type": "image_url", "image_url": {"url": data}}]
    client = openai.OpenAI(base_url=url.rstrip("/") + "/v1", api_key="api-key", max_retries=0, timeout=60)
    completion = client.chat.completions.create(
        model="hugginggpt", messages=[{"role": "user", "content": content}]
    )
    usage = completion.usage
    assert usage.total_tokens > 0 and set(usage.model_extra["by_stage"]) == {"plan", "select", "respond"}
    priced = (usage.prompt_tokens * 1.5 + usage.completion_tokens * 6.0) / 1e6
    assert usage.model_extra["cost"] == round(priced, 6)


def test_metrics_count_a_chat_and_an_api_request_with_their_labels(metered_app, tmp_path):
    url = metered_app.local_url
    before = scrape(url)
    chat_request(url, photo(tmp_path / "a.png"))
    api_request(url, photo(tmp_path / "b.png"))
    after = scrape(url)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("hugginggpt_requests_total", outcome="answered") == 2
    for stage in ("plan", "select", "execute", "respond"):
        assert grew("hugginggpt_stage_seconds_count", stage=stage) == 2, stage
    for task in ("image-to-text", "text-to-image", "text-to-speech"):
        assert grew("hugginggpt_task_seconds_count", task=task, where="fake", outcome="done") == 2, task
    assert (
        grew("hugginggpt_task_seconds_bucket", task="image-to-text", where="fake", outcome="done", le="+Inf")
        == 2
    )
    for stage in ("plan", "respond"):
        for direction in ("input", "output"):
            assert grew("hugginggpt_llm_tokens_total", stage=stage, direction=direction) > 0
    assert grew("hugginggpt_result_cache_lookups_total", result="miss") == 6
    assert grew("hugginggpt_llm_cost_total") > 0
    assert grew("hugginggpt_slot_wait_seconds_count") >= 2
    assert value(after, "hugginggpt_slots_in_use") == 0
    assert value(after, "hugginggpt_conversations_open") >= 1
    assert ("hugginggpt_models_resident", ()) in after and ("hugginggpt_models_resident_bytes", ()) in after


def test_metrics_ask_for_the_bearer_key(metered_app):
    reply = httpx.get(metered_app.local_url.rstrip("/") + "/metrics", trust_env=False)
    assert reply.status_code == 401 and "hugginggpt_" not in reply.text
    wrong = httpx.get(
        metered_app.local_url.rstrip("/") + "/metrics",
        headers={"Authorization": "Bearer no"},
        trust_env=False,
    )
    assert wrong.status_code == 401


def test_without_the_setting_there_is_no_metrics_route(llm_server, tmp_path):
    with running_app(
        app_settings(llm_server, tmp_path), catalog=fake_catalog(), endpoint=FakeEndpoint()
    ) as demo:
        reply = httpx.get(demo.local_url.rstrip("/") + "/metrics", trust_env=False)
    assert "hugginggpt_requests_total" not in reply.text


def test_the_expert_server_counts_its_calls_and_resident_models(tmp_path):
    settings = ServerSettings.from_mapping({"hub": True})
    runtime = settings.runtime()
    with protocol_server(create_app(LocalBackend(runtime), settings.table())) as url:
        image = photo(tmp_path / "c.png").read_bytes()
        for _ in range(2):
            reply = httpx.post(
                f"{url}/models/lllyasviel/Annotators/pipeline/canny-control", content=image, trust_env=False
            )
            assert reply.status_code == 200, reply.text
        httpx.post(f"{url}/models/x/pipeline/made-up-task", content=b"", trust_env=False)
        samples = scrape(url, key=None)
    assert value(samples, "hugginggpt_expert_calls_total", task="canny-control", status="200") == 2
    assert value(samples, "hugginggpt_expert_calls_total", task="other", status="404") == 1
    assert value(samples, "hugginggpt_expert_call_seconds_count", task="canny-control") == 2
    assert value(samples, "hugginggpt_expert_models_resident") == 1
    assert value(samples, "process_resident_memory_bytes") > 10_000_000
    for status in ("500", "503"):  # there at 0 before any failure: the first one shows in rate()
        key = ("hugginggpt_expert_calls_total", (("status", status), ("task", "canny-control")))
        assert samples[key] == 0
    assert value(samples, "hugginggpt_expert_call_seconds_bucket", task="canny-control", le="15.0") == 2
    assert value(samples, "hugginggpt_expert_calls_in_flight") == 0


def test_every_counter_label_is_there_at_zero_and_openmetrics_carries_the_trace_id(tmp_path):
    from fakes.endpoints import cards
    from fakes.llm_server import FakeLLMServer
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from hugginggpt.catalog import Catalog
    from hugginggpt.config import Settings
    from hugginggpt.files.workspace import Workspace
    from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
    from hugginggpt.observability import metrics, telemetry
    from hugginggpt.run.events import ErrorKind
    from hugginggpt.run.pipeline import Pipeline
    from hugginggpt.tasks import TASKS

    classic, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items())))
        for family in text_string_to_metric_families(classic.decode())
        for s in family.samples
    }
    for kind in ErrorKind:  # present before (or whatever) happened
        assert ("hugginggpt_errors_total", (("kind", str(kind)),)) in samples
    for task in TASKS:
        assert ("hugginggpt_tasks_total", (("outcome", "failed"), ("task", task))) in samples
    assert ("hugginggpt_errors_total", (("kind", "task"),)) not in samples  # task failures count apart
    assert any(name == "process_resident_memory_bytes" for name, _ in samples)
    assert any(name == "hugginggpt_build_info" for name, _ in samples)

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry.use(provider)
    try:
        with FakeLLMServer() as llm:
            llm.script("plan", '{"tasks": [{"task": "summarization", "id": 0, "args": {"text": "a b c"}}]}')
            llm.script("respond", "Summarized.")
            client = OpenAICompatibleLLM(base_url=llm.url, model="fake-llm", api_key="k", max_retries=0)
            catalog = Catalog(cards(("s", "summarization", 1)))
            pipeline = Pipeline(llm=client, catalog=catalog, endpoint=FakeEndpoint(), settings=Settings())
            list(pipeline.run("sum it up", workspace=Workspace(tmp_path / "c")))
    finally:
        telemetry.use(None)
    (root,) = [s for s in spans.get_finished_spans() if s.name == "invoke_agent hugginggpt"]
    trace_id = format(root.context.trace_id, "032x")
    text, content_type = metrics.render("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    exemplars = [line for line in text.decode().splitlines() if f'# {{trace_id="{trace_id}"}}' in line]
    assert any(line.startswith("hugginggpt_stage_seconds_bucket") for line in exemplars)
    assert any(line.startswith("hugginggpt_llm_call_seconds_bucket") for line in exemplars)
