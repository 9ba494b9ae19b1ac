"""What traces cost a request: the same 3-task request with traces off, with the collector down
(OTEL_EXPORTER_OTLP_ENDPOINT at a closed port), and with a collector that answers, in one run.

The fake LLM server answers at once and the fake tasks take 10 ms, so the request itself is short
and any time that export added would show. Requests alternate between the three settings (each its
own tracer provider, made once), so drift (other work on the machine) is shared; the medians and
their differences are printed in ms.
Run: python bench/telemetry_overhead.py [--rounds 60]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fakes.endpoints import FakeEndpoint, cards  # noqa: E402
from fakes.llm_server import FakeLLMServer  # noqa: E402
from fakes.otlp_receiver import OTLPReceiver  # noqa: E402

from hugginggpt.catalog import Catalog  # noqa: E402
from hugginggpt.config import Settings  # noqa: E402
from hugginggpt.files.workspace import Workspace  # noqa: E402
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM  # noqa: E402
from hugginggpt.observability import telemetry  # noqa: E402
from hugginggpt.run.events import Done  # noqa: E402
from hugginggpt.run.pipeline import Pipeline  # noqa: E402

CATALOG = Catalog(cards(("a", "summarization", 9), ("b", "summarization", 5)))
PLAN = {
    "tasks": [
        {"task": "summarization", "id": 0, "dep": [-1], "args": {"text": "some text"}},
        {"task": "summarization", "id": 1, "dep": [0], "args": {"text": "<resource>-0"}},
        {"task": "summarization", "id": 2, "dep": [0], "args": {"text": "<resource>-0"}},
    ]
}


def closed_port() -> int:
    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request_ms(pipeline: Pipeline, root: Path) -> float:
    started = time.perf_counter()
    events = list(pipeline.run("summarize twice", workspace=Workspace(root)))
    seconds = time.perf_counter() - started
    done = events[-1]
    assert isinstance(done, Done) and done.ok, done.error
    return seconds * 1000


def provider(endpoint: str) -> Any:
    """A provider exporting to `endpoint`, made once: switching costs the requests nothing."""
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    try:
        return telemetry.provider_from_env(telemetry.SERVICE)
    finally:
        del os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=60)
    args = p.parse_args()
    times: dict[str, list[float]] = {"off": [], "collector down": [], "collector up": []}
    with FakeLLMServer() as server, OTLPReceiver() as collector, tempfile.TemporaryDirectory() as tmp:
        server.script("plan", json.dumps(PLAN))
        server.script("select", '{"0": {"id": "a", "reason": "r"}}')
        server.script("respond", "Done: two summaries.")
        llm = OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="x", max_retries=0)
        pipeline = Pipeline(
            llm=llm,
            catalog=CATALOG,
            endpoint=FakeEndpoint(duration=0.01),
            settings=Settings(cache_max_bytes=0),
        )
        settings = {
            "off": None,
            "collector down": provider(f"http://127.0.0.1:{closed_port()}"),
            "collector up": provider(collector.url),
        }
        for chosen in settings.values():  # warm-up: imports, connections, first spans
            telemetry.use(chosen)
            request_ms(pipeline, Path(tmp) / "warm")
        for i in range(args.rounds):
            for name, chosen in settings.items():
                telemetry.use(chosen)
                times[name].append(request_ms(pipeline, Path(tmp) / f"r{i}"))
        telemetry.use(None)
        settings["collector up"].force_flush()
        spans = len(collector.spans)
    median = {name: statistics.median(ms) for name, ms in times.items()}
    print(f"{args.rounds} requests per setting (3 tasks of 10 ms each, LLM answering at once):")
    for name, ms in median.items():
        print(
            f"  {name:15s} median {ms:7.2f} ms  (p90 {statistics.quantiles(times[name], n=10)[-1]:7.2f} ms)"
        )
    print(f"  collector down - off: {median['collector down'] - median['off']:+.2f} ms per request")
    print(f"  collector up   - off: {median['collector up'] - median['off']:+.2f} ms per request")
    print(f"  spans the collector received: {spans}")


if __name__ == "__main__":
    main()
