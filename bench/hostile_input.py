"""Time and peak memory of the worst hostile inputs, on this tree or another checkout of the project.

    python bench/hostile_input.py [--tree DIR] [--timeout 60]

Each case runs in its own process (so one that hangs is stopped at --timeout and reported as such),
calling the same public functions every version has: the answer's file-name check, and plan
parsing with validation. Run it on this tree and on a checkout of an older commit (--tree) in one
session: the machine is shared and noisy, so compare the two runs' ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

CASES = {
    "answer: 40 k letters, no extension": "missing_files('QUJD' * 10_000)",
    "answer: 80 k letters, no extension": "missing_files('QUJD' * 20_000)",
    "answer: 1 M letters, no extension": "missing_files('QUJD' * 250_000)",
    "plan: 10,000 nested [": "plan('[' * 10_000)",
    "plan: 10 MB of nested lists": "plan('[' * 5_000_000 + ']' * 5_000_000)",
    "plan: 2.4 MB, 10,000 tasks": (
        "plan(json.dumps([{'task': 'summarization', 'id': i, 'dep': [-1], 'args': {'text': 'x' * 200}}"
        " for i in range(10_000)]))"
    ),
    "plan: a task with 60,000 dependencies": (
        "plan(json.dumps([{'task': 'summarization', 'id': 0, 'dep': list(range(1, 60_001)),"
        " 'args': {'text': 'x'}}]))"
    ),
}

RUNNER = textwrap.dedent(
    """
    import json, sys, time, tracemalloc
    from pathlib import Path
    from hugginggpt.stages.plan import FileRules, PlanParseError, parse_plan, validate_plan
    from hugginggpt.stages.respond import missing_files as _missing
    from hugginggpt.files.workspace import Workspace
    import tempfile
    ws = Workspace(Path(tempfile.mkdtemp()))
    def missing_files(text):
        return _missing(text, ws)
    def plan(reply):
        try:
            return validate_plan(parse_plan(reply), FileRules())
        except (PlanParseError, RecursionError) as e:
            return type(e).__name__
    tracemalloc.start()
    started = time.perf_counter()
    try:
        eval(sys.argv[1])
        outcome = "ok"
    except BaseException as e:
        outcome = type(e).__name__
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    print(json.dumps({"seconds": seconds, "peak_mb": peak / 2**20, "outcome": outcome}))
    """
)


def run_case(tree: Path, code: str, timeout: float) -> dict:
    try:
        done = subprocess.run(
            [sys.executable, "-c", RUNNER, code], cwd=tree, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"seconds": None, "peak_mb": None, "outcome": f"still running after {timeout:g} s"}
    lines = done.stdout.strip().splitlines()
    if not lines:
        return {"seconds": None, "peak_mb": None, "outcome": "crashed: " + done.stderr.strip()[-200:]}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    print(f"tree: {args.tree}")
    print(f"{'case':42} {'seconds':>9} {'peak MB':>9}  outcome")
    for name, code in CASES.items():
        r = run_case(Path(args.tree), code, args.timeout)
        seconds = "-" if r["seconds"] is None else f"{r['seconds']:.3f}"
        peak = "-" if r["peak_mb"] is None else f"{r['peak_mb']:.1f}"
        print(f"{name:42} {seconds:>9} {peak:>9}  {r['outcome']}", flush=True)


if __name__ == "__main__":
    main()
