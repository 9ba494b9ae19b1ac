"""How much the controller adds on top of the LLM and the models themselves.

With a fake LLM server of fixed latency and fake tasks of fixed duration, it measures:
  1. LLM calls per request for plans of 1 to 8 tasks (with and without a model choice);
  2. wall time / (LLM time + critical-path task time) for a chain, a fan-out and a diamond;
  3. the execution time of 4 independent 1-second tasks.
Run: python bench/pipeline_overhead.py [--llm-latency 0.2] [--task-seconds 0.5]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fakes.endpoints import FakeEndpoint, cards  # noqa: E402
from fakes.llm_server import FakeLLMServer  # noqa: E402

from hugginggpt.catalog import Catalog  # noqa: E402
from hugginggpt.config import Settings  # noqa: E402
from hugginggpt.files.workspace import Workspace  # noqa: E402
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM  # noqa: E402
from hugginggpt.run.events import Done  # noqa: E402
from hugginggpt.run.pipeline import Pipeline  # noqa: E402

# text-to-image has two candidates (a choice), summarization one (no choice).
CATALOG = Catalog(
    cards(("big", "text-to-image", 9), ("small", "text-to-image", 5), ("only", "summarization", 1))
)


def task(i: int, deps: list[int], kind: str = "text-to-image") -> dict:
    text = " ".join(f"<resource>-{d}" for d in deps) or f"picture {i}"
    if kind == "text-to-image" and deps:
        kind = "summarization"  # needs text in: the outputs of text tasks
    return {"task": kind, "id": i, "dep": deps or [-1], "args": {"text": text}}


def shapes(n_chain: int = 3) -> dict[str, tuple[list[dict], int]]:
    """name -> (plan tasks, length of the critical path in tasks)."""
    chain = [task(0, [], "summarization")] + [task(i, [i - 1], "summarization") for i in range(1, n_chain)]
    fan_out = [task(0, [], "summarization")] + [task(i, [0], "summarization") for i in range(1, 4)]
    diamond = [
        task(0, [], "summarization"),
        task(1, [0], "summarization"),
        task(2, [0], "summarization"),
        task(3, [1, 2], "summarization"),
    ]
    return {"chain": (chain, n_chain), "fan-out": (fan_out, 2), "diamond": (diamond, 3)}


def run_once(server: FakeLLMServer, plan: list[dict], endpoint: FakeEndpoint, select: str | None) -> Done:
    server.reset()
    server.script("plan", json.dumps({"tasks": plan}))
    server.script("select", select or "{}")
    server.script("respond", "done.")
    llm = OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="x", max_retries=0)
    pipeline = Pipeline(llm=llm, catalog=CATALOG, endpoint=endpoint, settings=Settings(max_workers=4))
    with tempfile.TemporaryDirectory() as tmp:
        events = list(pipeline.run("bench", workspace=Workspace(Path(tmp))))
    done = events[-1]
    assert isinstance(done, Done) and done.error is None, done.error
    return done


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--llm-latency", type=float, default=0.2)
    args.add_argument("--task-seconds", type=float, default=0.5)
    opts = args.parse_args()

    with FakeLLMServer(latency=opts.llm_latency) as server:
        print("1. LLM calls per request")
        print("   tasks | with a choice | without")
        for n in range(1, 9):
            choice = run_once(server, [task(i, []) for i in range(n)], FakeEndpoint(), None)
            plain = run_once(server, [task(i, [], "summarization") for i in range(n)], FakeEndpoint(), None)
            print(f"   {n:5} | {len(choice.trace['llm_calls']):13} | {len(plain.trace['llm_calls']):7}")

        print(
            "\n2. wall time / (LLM time + critical path), "
            f"LLM latency {opts.llm_latency} s, tasks {opts.task_seconds} s"
        )
        print("   shape    | wall s | LLM s | critical path s | ratio | overhead ms")
        for name, (plan, path_len) in shapes().items():
            done = run_once(server, plan, FakeEndpoint(duration=opts.task_seconds), None)
            wall = done.trace["timings"]["total"]
            llm_s = sum(c["seconds"] for c in done.trace["llm_calls"])
            critical = path_len * opts.task_seconds
            print(
                f"   {name:8} | {wall:6.3f} | {llm_s:5.3f} | {critical:15.3f} | "
                f"{wall / (llm_s + critical):5.3f} | {1000 * (wall - llm_s - critical):11.1f}"
            )

        print("\n3. 4 independent 1-second tasks")
        done = run_once(
            server, [task(i, [], "summarization") for i in range(4)], FakeEndpoint(duration=1.0), None
        )
        print(f"   execute stage: {done.trace['timings']['execute']:.3f} s (serial would be 4 s)")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"\n(benchmark ran {time.perf_counter() - t0:.1f} s)")
