"""How soon Stop ends a running local diffusion call, against the time the whole call takes.

    python bench/stop_latency.py [--steps 200] [--stop-after 0.3] [--repeat 3]

Builds the tiny Stable Diffusion of the tests (not timed), warms the runtime, then per repeat times
a whole text-to-image run of --steps steps, and a run whose stop signal is set --stop-after seconds
in: the time from setting it to the call returning is what a user waits after pressing Stop. On a
real model a step takes far longer, so the wait is at most one step there too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def press(pressed: list[float], stop: threading.Event) -> None:
    pressed.append(time.perf_counter())
    stop.set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--stop-after", type=float, default=0.3)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from tiny_vision import build_sd

    from models_local import Runtime, Stopped
    from models_local.handlers import diffusion

    diffusion.STEPS = args.steps
    work = Path(tempfile.mkdtemp(prefix="stop-bench-"))
    model = str(build_sd(work / "sd"))
    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    runtime.run("text-to-image", model, {"text": "warm"}, work / "out")  # load once, outside the timing

    whole, waits = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        runtime.run("text-to-image", model, {"text": "a red cat"}, work / "out")
        whole.append(time.perf_counter() - t0)

        stop = threading.Event()
        pressed: list[float] = []
        timer = threading.Timer(args.stop_after, press, (pressed, stop))
        timer.start()
        try:
            runtime.run("text-to-image", model, {"text": "a red cat"}, work / "out", stop=stop)
            raise SystemExit("the call finished before the stop: raise --steps")
        except Stopped:
            waits.append(time.perf_counter() - pressed[0])

    step = statistics.median(whole) / args.steps
    print(
        f"whole call ({args.steps} steps): median {statistics.median(whole) * 1000:.0f} ms "
        f"({step * 1000:.1f} ms per step)"
    )
    print(
        f"Stop to return: median {statistics.median(waits) * 1000:.1f} ms, max {max(waits) * 1000:.1f} ms "
        f"= {statistics.median(waits) / step:.2f} steps, "
        f"{statistics.median(waits) / statistics.median(whole):.3f} of the whole call"
    )


if __name__ == "__main__":
    main()
