"""Streaming execution against the sequential floor: tasks that start while the plan is written.

A fake LLM streams every reply a few characters at a time at a given rate (4 characters a token,
0.2 s to the first token), as a real server does; the experts are the expert server's HTTP app
(models_local.serve, uvicorn on 127.0.0.1) over a backend whose models take fixed times, called
through the remote endpoint (the Hugging Face inference protocol). For each plan shape, at each
rate, with streaming execution on and off in the same run, it reports
  wall / (LLM time + critical path)   LLM time: all calls' seconds added; critical path: the
                                      longest chain of task times. The sequential design cannot go
                                      below 1; streaming can, by overlapping them.
  first task at                       seconds from the request to the first call at the server
  JSON->start                         the longest wait of a task from its JSON object, its model
                                      choice and its dependencies being complete to its start
The "4-task" plan is the issue's: text-to-image 3 s (a real choice between two models), then
image-to-text 1 s and text-to-speech 1 s in a chain, image-classification 1 s beside them.

    python bench/plan_streaming.py [--rates 20 50] [--task-seconds 1.0]

One run on the 2-core development machine (shared; README.md, "Streaming execution", has the
table): the 4-task plan 0.76 at 20 tokens/s and 0.86 at 50 with streaming, 1.00 and 1.03 without;
chain, fan-out and diamond 0.77-0.88 with, 1.01-1.05 without; every task started within 2 ms of
being ready.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import sys
import tempfile
import time
import wave
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from fakes.llm_server import FakeLLMServer, Reply  # noqa: E402
from PIL import Image  # noqa: E402
from serve_support import protocol_server  # noqa: E402

from hugginggpt.catalog import Catalog, ModelCard  # noqa: E402
from hugginggpt.config import Settings  # noqa: E402
from hugginggpt.endpoints import build_endpoint  # noqa: E402
from hugginggpt.files.workspace import Workspace  # noqa: E402
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM  # noqa: E402
from hugginggpt.run.events import Done  # noqa: E402
from hugginggpt.run.pipeline import Pipeline  # noqa: E402
from models_local.serve import create_app  # noqa: E402
from models_local.serve.jobs import Job, Output  # noqa: E402
from models_local.serve.jobs import Reply as JobReply  # noqa: E402
from models_local.serve.models import ModelTable  # noqa: E402

CHARS_PER_TOKEN = 4
FIRST_TOKEN_S = 0.2
CATALOG = Catalog(
    [
        ModelCard(id="bench/t2i-big", task="text-to-image", downloads=9),
        ModelCard(id="bench/t2i-small", task="text-to-image", downloads=5),
        ModelCard(id="bench/caption", task="image-to-text", downloads=1),
        ModelCard(id="bench/speech", task="text-to-speech", downloads=1),
        ModelCard(id="bench/classify", task="image-classification", downloads=1),
        ModelCard(id="bench/summary", task="summarization", downloads=1),
    ]
)
SELECT_REPLY = json.dumps({"0": {"id": "bench/t2i-small", "reason": "smaller and good enough for a sketch"}})
ANSWER = (
    "I drew the picture, described it, read the description aloud and classified it; "
    "the files are above, and each step is listed in the plan."
)


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 80, 40)).save(out, format="PNG")
    return out.getvalue()


PNG = _png()


def _wav() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as clip:
        clip.setnchannels(1)
        clip.setsampwidth(2)
        clip.setframerate(8000)
        clip.writeframes(b"\x00\x00" * 800)
    return out.getvalue()


WAV = _wav()


class FixedTimeBackend:
    """The expert server's backend with models that take a fixed time per task."""

    name = "fixed-time"

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.arrivals: list[float] = []

    async def run(self, job: Job, stop: Any) -> JobReply:
        self.arrivals.append(time.perf_counter())
        await asyncio.sleep(self.seconds[job.task])
        return JobReply(outputs=_outputs(job.task))

    def resident(self) -> list[dict[str, Any]]:
        return []


def _outputs(task: str) -> list[Output]:
    if task == "text-to-image":
        return [Output("image", data=PNG, suffix=".png")]
    if task == "text-to-speech":
        return [Output("audio", data=WAV, suffix=".wav")]
    if task == "image-classification":
        return [Output("data", value=[{"label": "cat", "score": 0.9}])]
    return [Output("text", value=f"the {task} of the input")]


def t(i: int, task: str, args: dict[str, str], dep: list[int] | None = None) -> dict[str, Any]:
    return {"task": task, "id": i, "dep": dep or [-1], "args": args}


def summary(i: int, deps: list[int]) -> dict[str, Any]:
    text = " ".join(f"<resource>-{d}" for d in deps) or f"the long report number {i} to summarize"
    return t(i, "summarization", {"text": text}, deps)


def shapes(task_s: float) -> dict[str, tuple[list[dict[str, Any]], dict[str, float], float]]:
    """name -> (plan, seconds per task type, critical path in seconds)."""
    per_task = {"summarization": task_s}
    four = [
        t(0, "text-to-image", {"text": "a red fox jumping over a frozen river at dawn"}),
        t(1, "image-to-text", {"image": "<resource>-0"}, [0]),
        t(2, "text-to-speech", {"text": "<resource>-1"}, [1]),
        t(3, "image-classification", {"image": "<resource>-0"}, [0]),
    ]
    four_s = {"text-to-image": 3.0, "image-to-text": 1.0, "text-to-speech": 1.0, "image-classification": 1.0}
    return {
        "chain": ([summary(0, []), summary(1, [0]), summary(2, [1])], per_task, 3 * task_s),
        "fan-out": ([summary(0, []), *(summary(i, [0]) for i in (1, 2, 3))], per_task, 2 * task_s),
        "diamond": (
            [summary(0, []), summary(1, [0]), summary(2, [0]), summary(3, [1, 2])],
            per_task,
            3 * task_s,
        ),
        "4-task": (four, four_s, 5.0),
    }


def streamed(text: str, rate: float, *, first: bool = True) -> Reply:
    return Reply(
        text, chunk_chars=CHARS_PER_TOKEN, chunk_delay=1.0 / rate, delay=FIRST_TOKEN_S if first else 0.0
    )


def run_once(
    server: FakeLLMServer, experts: str, backend: FixedTimeBackend, plan: list[dict], rate: float, on: bool
) -> tuple[Done, float | None]:
    server.reset()
    server.script("plan", streamed(json.dumps({"tasks": plan}), rate))
    server.script("select", streamed(SELECT_REPLY, rate))
    server.script("respond", streamed(ANSWER, rate))
    llm = OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="x", max_retries=0)
    settings = Settings(max_workers=4, stream_execution=on, inference="remote", experts_url=experts)
    endpoint = build_endpoint("remote", experts_url=experts)
    pipeline = Pipeline(llm=llm, catalog=CATALOG, endpoint=endpoint, settings=settings)
    backend.arrivals.clear()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        events = list(pipeline.run("draw, describe, read aloud and classify", workspace=Workspace(Path(tmp))))
    done = events[-1]
    assert isinstance(done, Done) and done.error is None, done.error
    first = min(backend.arrivals) - t0 if backend.arrivals else None
    return done, first


def start_delay(trace: dict[str, Any]) -> float | None:
    """The longest wait of a task from being ready (JSON, choice and dependencies complete) to its start."""
    stream = trace.get("plan_stream")
    if not stream:
        return None
    times = {x["id"]: x for x in stream["tasks"] if "dropped" not in x}
    plan = {x["id"]: x for x in trace["plan"]}
    waits = []
    for i, x in times.items():
        deps = [times[d]["finished"] for d in plan[i]["dep"] if d >= 0]
        waits.append(x["started"] - max([x["parsed"], x["selected"], *deps]))
    return max(waits)


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--rates", type=float, nargs="+", default=[20.0, 50.0])
    args.add_argument("--task-seconds", type=float, default=1.0)
    opts = args.parse_args()

    backend = FixedTimeBackend()
    app = create_app(backend, ModelTable(models_dir=None, hub=True))
    print("wall / (LLM time + critical path); streaming execution on vs off, in one run")
    print(" shape   | tok/s | stream | wall s | LLM s | path s | ratio | first task at s | JSON->start s")
    with protocol_server(app) as experts, FakeLLMServer() as server:
        plan, seconds, _ = shapes(opts.task_seconds)["4-task"]
        backend.seconds = dict.fromkeys(seconds, 0.0)
        for on in (True, False):  # imports and first connections, not reported
            run_once(server, experts, backend, plan, 1000.0, on)
        for name, (plan, seconds, critical) in shapes(opts.task_seconds).items():
            backend.seconds = seconds
            for rate in opts.rates:
                for on in (True, False):
                    done, first = run_once(server, experts, backend, plan, rate, on)
                    wall = done.trace["timings"]["total"]
                    llm_s = sum(c["seconds"] for c in done.trace["llm_calls"])
                    delay = start_delay(done.trace)
                    print(
                        f" {name:7} | {rate:5.0f} | {'on' if on else 'off':6} | {wall:6.2f} | {llm_s:5.2f} | "
                        f"{critical:6.2f} | {wall / (llm_s + critical):5.2f} | "
                        f"{first if first is not None else float('nan'):15.2f} | "
                        + (f"{delay:13.3f}" if delay is not None else f"{'-':>13}")
                        + f"   ({done.llm_calls} LLM calls)"
                    )


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"\n(benchmark ran {time.perf_counter() - t0:.1f} s)")
