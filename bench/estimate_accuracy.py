"""How close the estimates are: estimated vs measured seconds and memory for tiny models, N runs each.

    python bench/estimate_accuracy.py [--runs 20] [--only text,audio,vision] [--device cpu]

Each run asks the Estimator (hugginggpt/costs/estimate.py) for the model's estimate, runs the model once
through the local endpoint (the same call the executor makes), and keeps the measured seconds, as
a finished run does. The first run of a model is estimated from the prior (size and task); later
ones from this machine's past runs (their median). Memory: the estimate (from the weight files) vs
what the runtime measured on the loaded model (its parameters and buffers). The error of a run is
|estimate - measured| / measured; the report gives the median per model and over all runs, with and
without each model's first run. The first run loads the model and the others find it loaded, so the
second and third estimates still mix a load into a call; the median of past runs settles by the fourth.

Measured on this project's 2-core CPU machine shared with other jobs (2026-12-03), 20 runs each:
10 models (text, audio, vision) at load average 2.4: median error 8.4% over 200 runs, 7.5% after
each model's first run (noise floor 6.0%); memory 0.0% (2.3 to 10.4% on three models). The 8 text
and audio models at load 8.7: 29.9% (noise floor 27.4%). The estimate stays within a few points of
the noise floor: what is left is the machine's own variation from call to call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def error(estimate: float, measured: float) -> float:
    return abs(estimate - measured) / measured if measured > 0 else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--only", default="text,audio,vision", help="families, comma-separated")
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: the runtime's choice)")
    args = parser.parse_args()
    if args.device:
        os.environ["HUGGINGGPT_DEVICE"] = args.device

    from local_runtime import _cases, _vision_cases  # the tiny models of bench/local_runtime.py

    import models_local
    from hugginggpt.catalog import ModelCard
    from hugginggpt.costs.estimate import Estimator
    from hugginggpt.endpoints import Call, LocalEndpoint

    families = set(args.only.split(","))
    picked = {"text-classification", "token-classification", "text-generation", "summarization"}
    picked |= {"automatic-speech-recognition", "text-to-speech", "image-classification", "object-detection"}
    cases = [c for c in _cases() + _vision_cases() if c.family in families and c.task in picked]
    endpoint = LocalEndpoint()
    runtime = models_local.default_runtime()
    all_seconds: list[float] = []
    after_first: list[float] = []
    memory_errors: list[float] = []
    floors: list[float] = []
    print(f"device {runtime.device.name}, {args.runs} runs per model")
    print(
        f"{'model':40} {'median s err':>12} {'after 1st':>10} {'mem est':>10} {'mem meas':>10} {'mem err':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        estimator = Estimator(Path(tmp) / "estimates")
        for n, case in enumerate(cases):
            folder = Path(tmp) / f"model{n}"
            folder.mkdir()
            case.builder(folder)
            work = Path(tmp) / f"work{n}"
            work.mkdir()
            inputs = case.inputs(work)
            name = f"{case.builder.__name__}/{case.task}"
            card = ModelCard(id=f"tiny/{name}", task=case.task, path=str(folder), local=True)
            errors, measured_all = [], []
            used_before = runtime.used
            memory_estimate = None
            for i in range(args.runs):
                estimate = estimator.estimate(endpoint, card)
                memory_estimate = memory_estimate or estimate.memory_bytes
                started = time.perf_counter()
                endpoint.run(case.task, card, dict(inputs), Call(out_dir=work / f"out{i}"))
                measured = time.perf_counter() - started
                estimator.times.add(card.id, card.task, estimate.where, measured)
                errors.append(error(estimate.seconds or 0.0, measured))
                measured_all.append(measured)
            loaded = runtime.used - used_before
            mem_err = error(float(memory_estimate or 0), float(loaded)) if loaded else float("nan")
            memory_errors.append(mem_err)
            all_seconds += errors
            after_first += errors[1:]
            # The noise floor: the error of the best constant guess for the calls after the first
            # (their own median), known only afterwards. No estimate from past runs does better.
            typical = statistics.median(measured_all[1:])
            floor = statistics.median(error(typical, m) for m in measured_all[1:])
            floors.append(floor)
            print(
                f"{name:40} {statistics.median(errors):12.1%} {statistics.median(errors[1:]):10.1%} "
                f"{floor:7.1%} "
                f"{(memory_estimate or 0) / 1e6:9.2f}M {loaded / 1e6:9.2f}M {mem_err:8.1%}"
            )
            runtime.clear()
    print(
        f"median error over all runs: seconds {statistics.median(all_seconds):.1%} "
        f"({len(all_seconds)} runs), after each model's first run {statistics.median(after_first):.1%} "
        f"(noise floor {statistics.median(floors):.1%}); "
        f"memory {statistics.median(memory_errors):.1%} ({len(memory_errors)} models)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
