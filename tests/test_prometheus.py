"""The app's /metrics as a real Prometheus reads them (Debian's `prometheus`, started here on
127.0.0.1 with a config of its own), after a failing and a succeeding request, through PromQL:

P1 every label value of a counter is there at 0 before anything happens, so the first error after a
restart shows in increase(); P2 the buckets fit LLM and model times; P3 a task that failed before any
attempt is counted once; P4 the stage a request failed in is timed; P5 failed requests and failed
tasks are separate series. Every panel of deploy/grafana/hugginggpt.json must evaluate too.

Skips when the binary is missing, unless HUGGINGGPT_REQUIRE_PROMETHEUS=1 (CI), then fails.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from app_support import app_settings, running_app
from fakes.endpoints import FakeEndpoint, cards
from fakes.llm_server import FakeLLMServer, Reply
from PIL import Image
from serve_support import protocol_server

from hugginggpt.catalog import Catalog
from hugginggpt.observability import telemetry
from hugginggpt.tasks import TASKS
from models_local.serve import LocalBackend, ServerSettings, create_app

KEY = "metrics-key"
DASHBOARD = Path(__file__).parent.parent / "deploy" / "grafana" / "hugginggpt.json"
PLAN = {
    "tasks": [
        {"task": "text-to-image", "id": 0, "dep": [-1], "args": {"text": "a red bicycle"}},
        {
            "task": "text-to-speech",
            "id": 1,
            "dep": [-1],
            "args": {"text": "a red bicycle"},
        },  # no model can run
    ]
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prometheus_or_skip() -> str:
    found = shutil.which("prometheus")
    if found is None:
        if os.environ.get("HUGGINGGPT_REQUIRE_PROMETHEUS") == "1":
            pytest.fail(
                "HUGGINGGPT_REQUIRE_PROMETHEUS=1 but prometheus is missing (apt-get install prometheus)"
            )
        pytest.skip("prometheus is not installed")
    return found


def responder(stage: str, body: dict[str, Any]) -> Reply | str:
    if stage == "plan":
        asked = " ".join(str(m["content"]) for m in body["messages"] if m["role"] == "user")
        return Reply(status=500) if "[fail]" in asked else json.dumps(PLAN)
    return "The picture is drawn; no model could read it aloud."


class Prometheus:
    def __init__(self, binary: str, target: str, experts: str, folder: Path) -> None:
        config = folder / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: hugginggpt\n"
            f"    authorization: {{credentials: {KEY}}}\n"
            f"    static_configs: [{{targets: ['{target}']}}]\n"
            "  - job_name: hugginggpt-experts\n"
            f"    static_configs: [{{targets: ['{experts}']}}]\n"
        )
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--enable-feature=exemplar-storage",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(folder / "prometheus.log").open("wb"),
        )

    def query(self, promql: str) -> list[dict[str, Any]]:
        reply = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, trust_env=False, timeout=10)
        body = reply.json()
        assert body["status"] == "success", (promql, body)
        return body["data"]["result"]

    def value(self, promql: str) -> float | None:
        result = self.query(promql)
        assert len(result) <= 1, (promql, result)
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, promql: str, want: float, timeout: float = 60) -> None:
        end, seen = time.monotonic() + timeout, None
        while time.monotonic() < end:
            try:
                seen = self.value(promql)
            except (httpx.HTTPError, ValueError):  # not up yet: no answer, or not JSON yet
                seen = None
            if seen is not None and seen >= want:
                return
            time.sleep(0.3)
        raise AssertionError(f"{promql} stayed at {seen}, wanted {want}")

    def exemplars(self, promql: str, since: float) -> list[dict[str, Any]]:
        params = {"query": promql, "start": since, "end": time.time() + 1}
        reply = httpx.get(f"{self.url}/api/v1/query_exemplars", params=params, trust_env=False, timeout=10)
        body = reply.json()
        assert body["status"] == "success", body
        return [e for series in body["data"] for e in series["exemplars"]]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def ask(url: str, text: str) -> None:
    client = openai.OpenAI(base_url=url.rstrip("/") + "/v1", api_key="api-key", max_retries=0, timeout=60)
    try:
        client.chat.completions.create(model="hugginggpt", messages=[{"role": "user", "content": text}])
    except openai.APIError:
        pass  # the failing request: what it answered is the API's business, the metrics are ours


def test_prometheus_reads_p1_to_p5_after_a_failing_and_a_succeeding_request(tmp_path):
    from opentelemetry.sdk.trace import TracerProvider

    binary = prometheus_or_skip()
    telemetry.use(TracerProvider())  # traces on (exported nowhere): the histograms carry exemplars
    catalog = Catalog(cards(("org/painter", "text-to-image", 3), ("org/speaker", "text-to-speech", 2)))
    endpoint = FakeEndpoint(unrunnable={"org/speaker"})
    with FakeLLMServer() as llm:
        llm.responder = responder
        settings = app_settings(llm, tmp_path / "ws", api_keys=("api-key",), metrics=True, metrics_key=KEY)
        server = ServerSettings.from_mapping({"hub": True})
        with (
            running_app(settings, catalog=catalog, endpoint=endpoint) as demo,
            protocol_server(create_app(LocalBackend(server.runtime()), server.table())) as experts,
        ):
            target = demo.local_url.removeprefix("http://").strip("/")
            prometheus = Prometheus(binary, target, experts.removeprefix("http://"), tmp_path)
            try:
                check(prometheus, demo.local_url)
                call_the_experts(experts, tmp_path)
                prometheus.wait_for("sum(hugginggpt_expert_calls_total)", 2)
                panels(prometheus)
            finally:
                prometheus.stop()
                telemetry.use(None)


def call_the_experts(url: str, folder: Path) -> None:
    """One model call (the builtin edge detector: no weights) and one for a task it does not serve."""
    image = folder / "photo.png"
    Image.new("RGB", (48, 40), "red").save(image)
    canny = f"{url}/models/lllyasviel/Annotators/pipeline/canny-control"
    assert httpx.post(canny, content=image.read_bytes(), trust_env=False, timeout=60).status_code == 200
    assert (
        httpx.post(f"{url}/models/x/pipeline/made-up-task", content=b"", trust_env=False).status_code == 404
    )


def check(prom: Prometheus, url: str) -> None:
    # P1: before any request, every label value is a series at its value (0 in a fresh process)
    prom.wait_for('count(hugginggpt_errors_total{kind="llm"})', 1)
    assert prom.value("count(hugginggpt_errors_total)") == 5  # llm, plan, input, limit, internal
    assert prom.value("count(hugginggpt_requests_total)") == 5
    # every task type of the registry at each outcome (a tool's task type that an earlier test of this
    # process ran stays a series of the process-wide registry: no fewer, not exactly)
    builtin = "|".join(sorted(TASKS))
    assert prom.value(f'count(hugginggpt_tasks_total{{task=~"{builtin}"}})') == len(TASKS) * 3
    t0 = time.time()
    prom.wait_for('count_over_time(up{job="hugginggpt"}[1m])', 2)  # two scrapes before the requests

    ask(url, "[fail] draw a red bicycle and read it aloud")  # the LLM answers 500 while planning
    ask(url, "draw a red bicycle and read it aloud")
    since = f"@ {t0:.3f}"

    def grew(series: str) -> float | None:
        return prom.value(f"sum({series}) - (sum({series} {since}) or vector(0))")

    prom.wait_for(f"sum(hugginggpt_requests_total) - sum(hugginggpt_requests_total {since})", 2)
    prom.wait_for('count_over_time(up{job="hugginggpt"}[1m])', 4)

    # P1: the first LLM failure after the start shows in increase()
    assert (prom.value('increase(hugginggpt_errors_total{kind="llm"}[1m])') or 0) > 0.5
    # P5: one failed request, one failed task, in separate series
    assert grew('hugginggpt_requests_total{outcome="failed"}') == 1
    assert grew('hugginggpt_requests_total{outcome="answered"}') == 1
    assert grew("hugginggpt_errors_total") == 1
    assert grew('hugginggpt_errors_total{kind="llm"}') == 1
    # P3: the task no model could run is counted once, with no attempt
    assert grew('hugginggpt_tasks_total{task="text-to-speech", outcome="failed"}') == 1
    assert grew('hugginggpt_tasks_total{outcome="failed"}') == 1
    assert grew('hugginggpt_tasks_total{task="text-to-image", outcome="done"}') == 1
    assert grew('hugginggpt_task_seconds_count{task="text-to-speech"}') in (None, 0)
    # P4: planning is timed in the request that failed in it too
    assert grew('hugginggpt_stage_seconds_count{stage="plan"}') == 2
    assert grew('hugginggpt_stage_seconds_count{stage="respond"}') == 1
    # P2: buckets between 10 s and 30 s, and up to 15 minutes
    les = {r["metric"]["le"] for r in prom.query('hugginggpt_stage_seconds_bucket{stage="plan"}')}
    assert {"10.0", "15.0", "20.0", "30.0", "900.0", "+Inf"} <= les
    # the dashboard's quantiles read the first requests after a start (the series were there at 0)
    for stage in ("plan", "respond"):
        buckets = f'rate(hugginggpt_stage_seconds_bucket{{stage="{stage}"}}[1m])'
        p95 = prom.value(f"histogram_quantile(0.95, sum by (le) ({buckets}))")
        assert p95 is not None and 0 < p95 < 15, (stage, p95)
    # P7/P8: per-call LLM time and time to first token, the process, the build
    assert grew('hugginggpt_llm_call_seconds_count{stage="plan", outcome="error"}') == 1
    assert grew('hugginggpt_llm_call_seconds_count{stage="plan", outcome="done"}') == 1
    assert (grew("hugginggpt_llm_time_to_first_token_seconds_count") or 0) >= 2
    assert (prom.value("max(process_resident_memory_bytes)") or 0) > 10_000_000
    # exemplars: Prometheus asked for OpenMetrics and kept each observation's trace id
    traces = {
        e["labels"]["trace_id"]
        for e in prom.exemplars('hugginggpt_llm_call_seconds_bucket{stage="plan"}', t0)
    }
    assert len(traces) == 2 and all(len(t) == 32 for t in traces)  # the failed call's trace and the other's
    assert prom.exemplars("hugginggpt_stage_seconds_bucket", t0)
    (build,) = prom.query("hugginggpt_build_info")
    assert build["metric"]["version"] and build["value"][1] == "1"


def panels(prom: Prometheus) -> None:
    """Every query of every dashboard panel evaluates (written to the file HUGGINGGPT_PANELS_OUT names)."""
    dashboard = json.loads(DASHBOARD.read_text())
    results = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$__rate_interval", "1m")
            results.append({"panel": panel["title"], "expr": expr, "result": prom.query(expr)})
    assert len(results) >= 20
    answered = {r["panel"] for r in results if r["result"]}
    assert answered == {p["title"] for p in dashboard["panels"] if p["type"] != "row"}  # no empty panel
    out = os.environ.get("HUGGINGGPT_PANELS_OUT")
    if out:
        Path(out).write_text(json.dumps(results, indent=1))
