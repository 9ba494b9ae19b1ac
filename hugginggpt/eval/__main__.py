"""python -m hugginggpt.eval: plan TaskBench requests with an LLM, score the plans, report.

python -m hugginggpt.eval --data DIR [--limit N] [--shots K] [--out DIR] [--llm-base-url URL]
                          [--llm-model NAME] [--llm-api-key KEY] [--workers N]
python -m hugginggpt.eval score --data DIR --out RUN_DIR [--limit N]    (re-score, no LLM)
python -m hugginggpt.eval compare RUN_DIR RUN_DIR ... [--out DIR]

Each run folder holds run.json (what was run), predictions.jsonl (one line per request, written as
it comes; a rerun resumes), metrics.json, report.md and PNG charts. To compare numbers of demos:

    for k in 0 2 4 6; do python -m hugginggpt.eval --data DIR --shots $k --llm-model M ...; done
    python -m hugginggpt.eval compare runs/eval/M-0shots runs/eval/M-2shots runs/eval/M-4shots ...
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hugginggpt.commands.cli import add_llm_arguments, settings_from_args
from hugginggpt.config import Settings
from hugginggpt.eval.data import DataError, load_dataset
from hugginggpt.eval.harness import RunMismatch, RunSettings, run_predictions
from hugginggpt.eval.metrics import format_value
from hugginggpt.eval.report import compare_runs, write_report
from hugginggpt.eval.score import score_run
from hugginggpt.llms.interface import LLM


def run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m hugginggpt.eval",
        description="Evaluate the planning stage on "
        "TaskBench-format data. Subcommands: score, compare (see their --help).",
    )
    p.add_argument(
        "--data", required=True, type=Path, help="folder with tool_desc.json, a gold file, requests"
    )
    p.add_argument("--gold", type=Path, help="the gold file, when the folder holds several")
    p.add_argument("--limit", type=int, help="only the first N samples of the gold file")
    p.add_argument("--shots", type=int, help="few-shot demos in the planning prompt (default: all)")
    p.add_argument("--out", type=Path, help="run folder (default: runs/eval/<model>-<shots>shots)")
    p.add_argument("--max-retries", type=int, help="self-correction retries per request (default: 2)")
    p.add_argument("--workers", type=int, default=1, help="requests in flight at once (server LLMs only)")
    p.add_argument(
        "--no-files",
        action="store_true",
        help="do not list the media files a request mentions (example.jpg) as its uploads",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_llm_arguments(p)
    return p


def score_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m hugginggpt.eval score",
        description="Score a run's predictions again and rewrite its report; asks no LLM.",
    )
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--gold", type=Path)
    p.add_argument("--limit", type=int)
    p.add_argument("--out", required=True, type=Path, help="the run folder")
    return p


def compare_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hugginggpt.eval compare", description="Runs side by side.")
    p.add_argument("runs", nargs="+", type=Path, help="run folders (each with metrics.json)")
    p.add_argument("--out", type=Path, default=Path("runs/eval/compare"))
    return p


@dataclass
class LLMChoice:
    make: Callable[[], LLM]  # called once per worker thread
    model: str
    base_url: str | None
    server: bool
    settings: Settings


def choose_llm(args: argparse.Namespace) -> LLMChoice:
    from hugginggpt.factory import DEFAULT_SERVER_MODEL, build_llm

    settings = settings_from_args(args)
    if settings.uses_server:
        # One client per worker thread: each LLM keeps its own call log, which make_plan reads.
        model = settings.llm_model or DEFAULT_SERVER_MODEL
        return LLMChoice(lambda: build_llm(settings), model, settings.llm_base_url, True, settings)
    shared = build_llm(settings)  # a local model: loaded once, one request at a time
    return LLMChoice(lambda: shared, settings.llm_model or settings.local_llm_model, None, False, settings)


def main_run(argv: list[str]) -> int:
    args = run_parser().parse_args(argv)
    dataset = load_dataset(args.data, gold=args.gold)
    samples = dataset.samples[: args.limit] if args.limit else dataset.samples
    llm = choose_llm(args)
    shots = args.shots if args.shots is not None else llm.settings.shots
    out = args.out or Path("runs/eval") / f"{_slug(llm.model)}-{'all' if shots is None else shots}shots"
    run_settings = RunSettings(
        out=out,
        model=llm.model,
        base_url=llm.base_url,
        shots=shots,
        max_retries=args.max_retries if args.max_retries is not None else llm.settings.max_plan_retries,
        workers=args.workers if llm.server else 1,
        offer_files=not args.no_files,
        gold=dataset.gold_path,
    )
    summary = run_predictions(samples, run_settings, llm.make, data=args.data, progress=not args.no_progress)
    result = score_run(dataset, samples, out)
    report = write_report(result, out)
    overall = result["groups"]["overall"]
    print(f"{summary.asked} asked, {summary.skipped} already predicted; report: {report}")
    shown = {k: format_value(k, overall[k]) for k in ("node_f1", "edge_f1", "arg_v_f1", "invalid_share")}
    print(
        f"node F1 {shown['node_f1']}, edge F1 {shown['edge_f1']}, "
        f"v-F1 {shown['arg_v_f1']}, invalid plans {shown['invalid_share']}"
    )
    if summary.backend_failures:
        print(
            f"{len(summary.backend_failures)} requests failed and were not recorded (rerun to retry them); "
            f"first: {summary.backend_failures[0]}",
            file=sys.stderr,
        )
    if summary.aborted:
        print(summary.aborted, file=sys.stderr)
        return 130 if summary.aborted.startswith("interrupted") else 1
    return 0


def main_score(argv: list[str]) -> int:
    args = score_parser().parse_args(argv)
    dataset = load_dataset(args.data, gold=args.gold)
    samples = dataset.samples[: args.limit] if args.limit else dataset.samples
    print(write_report(score_run(dataset, samples, args.out), args.out))
    return 0


def main_compare(argv: list[str]) -> int:
    args = compare_parser().parse_args(argv)
    print(compare_runs(args.runs, args.out))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"score": main_score, "compare": main_compare}
    command = commands.get(argv[0]) if argv else None
    try:
        return command(argv[1:]) if command else main_run(argv)
    except (DataError, RunMismatch, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "llm"


if __name__ == "__main__":
    sys.exit(main())
