"""Crash and resume at 20 points of a run: real processes, `kill -9`, then `python -m hugginggpt resume`.

The fake LLM streams every reply at a token rate (4 characters a token); the expert server
(models_local.serve's HTTP app under uvicorn) runs models that take fixed times: text-to-image 1 s,
then image-to-text, text-to-speech and image-classification 0.5 s each (tests/crash_support.py,
the 4-task plan of bench/plan_streaming.py). The result cache is off, so what is not run again is
the journal's doing. For each point: where the run was (from its journal), the tasks that had
finished, whether any of them ran again at the expert server, the LLM calls made after the restart
against the ones that had not ended, whether every record still reads, whether the resumed run
answered, and the seconds from the restart to the answer against a plain retry (the whole request
run again from the start; the median of 3), with the process's start, and the run's own (from its
trace: no interpreter start and imports, which on a loaded machine vary by seconds).

    python bench/crash_resume.py [--rate 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from crash_support import Point, harness  # noqa: E402

SECONDS = {"text-to-image": 1.0, "image-to-text": 0.5, "text-to-speech": 0.5, "image-classification": 0.5}
POINTS = [
    Point("plan stream, first token", "plan", 0.1),
    Point("plan stream", "plan", 0.4),
    Point("plan stream", "plan", 0.8),
    Point("plan stream", "plan", 1.2),
    Point("plan stream", "plan", 1.7),
    Point("inside text-to-image", "start:text-to-image", 0.1),
    Point("inside text-to-image", "start:text-to-image", 0.7),
    Point("between tasks", "end:text-to-image", 0.0),
    Point("between tasks", "end:text-to-image", 0.03),
    Point("inside image-to-text", "start:image-to-text", 0.2),
    Point("inside image-classification", "start:image-classification", 0.3),
    Point("between tasks", "end:image-to-text", 0.0),
    Point("inside text-to-speech", "start:text-to-speech", 0.25),
    Point("after the last task", "end:text-to-speech", 0.0),
    Point("during the answer, first token", "respond", 0.1),
    Point("during the answer", "respond", 0.4),
    Point("during the answer", "respond", 0.8),
    Point("during a save (2nd write)", "save:2", 0.0),
    Point("during a save (6th write)", "save:6", 0.0),
    Point("during a save (10th write)", "save:10", 0.0),
]


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--rate", type=float, default=50.0, help="LLM tokens per second")
    opts = args.parse_args()
    with (
        tempfile.TemporaryDirectory(dir=ROOT / ".tmp") as tmp,
        harness(Path(tmp), rate=opts.rate, seconds=SECONDS) as h,
    ):
        plains = [h.run_plain() for _ in range(3)]
        plain = statistics.median(wall for wall, _ in plains)
        plain_own = statistics.median(own for _, own in plains)
        print(
            f"plain retry (the whole request again, median of 3): {plain:.2f} s, "
            f"the run's own {plain_own:.2f} s\n"
        )
        print(
            "| # | kill point | where the run was | finished before | ran again | "
            "LLM calls after restart (expected) | records read | answered | restart->answer s (x retry) | "
            "run's own s (x retry's) |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        ok = 0
        for i, point in enumerate(POINTS, start=1):
            o = h.crash_and_resume(point)
            ok += o.ok
            after = ",".join(o.llm_after) or "-"
            expected = ",".join(o.llm_expected)
            print(
                f"| {i} | {point.name} ({point.trigger} +{point.delay:g} s) | {o.where}"
                f"{' (torn line)' if o.torn else ''}{'' if o.killed else ' (ended before the kill)'} | "
                f"{len(o.finished_before)} | {len(o.ran_again)} | {after} ({expected}) | "
                f"{'yes' if o.records_read else 'NO'} | {'yes' if o.answered else 'NO'} | "
                f"{o.resume_seconds:.2f} ({o.resume_seconds / plain:.2f}) | "
                f"{o.run_seconds:.2f} ({o.run_seconds / plain_own:.2f}) |",
                flush=True,
            )
            for error in o.errors:
                print(error, file=sys.stderr)
        print(
            f"\n{ok} of {len(POINTS)} points: killed, 0 finished tasks run again, answered, records read, "
            "only unfinished LLM calls made again"
        )


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"\n(benchmark ran {time.perf_counter() - t0:.1f} s)")
