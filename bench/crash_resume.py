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

With `--app`, the app instead: `python app.py` with a request typed into its page in headless
Chromium (tests/crash_app_support.py), killed at APP_POINTS and started again on the same folder,
where it continues the run on its own (resume_on_start); the seconds are from the restarted app's
process start to the answer in the conversation's record, the app's own start among them.

    python bench/crash_resume.py [--rate 50] [--app]
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


APP_POINTS = [
    Point("plan stream", "plan", 0.6),
    Point("inside text-to-image", "start:text-to-image", 0.3),
    Point("a task ended, the next one running", "end:text-to-image", 0.2),
    Point("inside text-to-speech", "start:text-to-speech", 0.25),
    Point("during the answer", "respond", 0.3),
]


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--rate", type=float, default=50.0, help="LLM tokens per second")
    args.add_argument("--app", action="store_true", help="kill the app (python app.py), not the CLI")
    opts = args.parse_args()
    if opts.app:
        app_table(opts.rate)
        return
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


def app_table(rate: float) -> None:
    from crash_app_support import AppHarness
    from playwright.sync_api import sync_playwright
    from test_browser import chromium

    print(
        "| # | kill point | where the run was | finished before | ran again | "
        "LLM calls after restart (expected) | continued on start | records read | answered | "
        "restart->answer s | of which the app's start s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ok = 0
    with (
        tempfile.TemporaryDirectory(dir=ROOT / ".tmp") as tmp,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        h = AppHarness(Path(tmp), rate=rate, seconds=SECONDS)
        try:
            for i, point in enumerate(APP_POINTS, start=1):
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                context.set_default_timeout(60_000)
                try:
                    o = h.crash_app_and_continue(point, context, Path(tmp) / f"app-{i}")
                finally:
                    context.close()
                ok += o.ok
                print(
                    f"| {i} | {point.name} ({point.trigger} +{point.delay:g} s) | {o.where}"
                    f"{'' if o.killed else ' (ended before the kill)'} | {len(o.finished_before)} | "
                    f"{len(o.ran_again)} | {','.join(o.llm_after) or '-'} ({','.join(o.llm_expected)}) | "
                    f"{'yes' if o.continued else 'NO'} | {'yes' if o.records_read else 'NO'} | "
                    f"{'yes' if o.answered else 'NO'} | {o.restart_to_answer:.2f} | {o.app_start:.2f} |",
                    flush=True,
                )
        finally:
            h.close()
    print(
        f"\n{ok} of {len(APP_POINTS)} points: killed, continued on start, 0 finished tasks run again, "
        "answered, records read, only unfinished LLM calls made again"
    )


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"\n(benchmark ran {time.perf_counter() - t0:.1f} s)")
