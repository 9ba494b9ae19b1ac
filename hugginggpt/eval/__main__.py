"""python -m hugginggpt.eval: plan TaskBench requests with an LLM, score the plans, report.

python -m hugginggpt.eval --data DIR [--limit N] [--shots K] [--out DIR] [--llm-base-url URL]
                          [--llm-model NAME] [--llm-api-key KEY] [--workers N]
python -m hugginggpt.eval score --data DIR --out RUN_DIR [--limit N]    (re-score, no LLM)
python -m hugginggpt.eval compare RUN_DIR RUN_DIR ... [--out DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .data import DataError, load_dataset
from .harness import RunMismatch, RunSettings, run_predictions
from .report import compare_runs, write_report
from .score import score_run


def add_llm_flags(parser: argparse.ArgumentParser) -> None:
    try:  # the main CLI's flags, where it offers them
        from ..cli import add_llm_arguments
    except ImportError:
        add_llm_arguments = None
    if add_llm_arguments is not None:
        add_llm_arguments(parser)
        return
    parser.add_argument("--llm-base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--llm-model", help="model name the server knows")
    parser.add_argument("--llm-api-key", help="API key (default: HUGGINGGPT_LLM_API_KEY or OPENAI_API_KEY)")


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
    p.add_argument("--max-retries", type=int, default=2, help="self-correction retries per request")
    p.add_argument("--workers", type=int, default=1, help="requests in flight at once (server LLMs only)")
    p.add_argument(
        "--no-files",
        action="store_true",
        help="do not list the media files a request mentions (example.jpg) as its uploads",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_llm_flags(p)
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


def make_llm_factory(args: argparse.Namespace):
    from ..config import load_settings
    from ..llm import LocalChatLLM, OpenAICompatibleLLM

    settings = load_settings().with_overrides(
        llm_base_url=args.llm_base_url, llm_model=args.llm_model, llm_api_key=args.llm_api_key
    )
    if settings.uses_server:
        model = settings.llm_model or "gpt-4o-mini"

        def factory():
            return OpenAICompatibleLLM(
                base_url=settings.llm_base_url,
                model=model,
                api_key=settings.llm_api_key,
                timeout=settings.llm_timeout,
                max_retries=settings.llm_max_retries,
            )

        return factory, model, settings.llm_base_url, True
    model = settings.llm_model or settings.local_llm_model
    shared = LocalChatLLM(model)  # one model in memory, one request at a time
    return (lambda: shared), model, None, False


def main_run(argv: list[str]) -> int:
    args = run_parser().parse_args(argv)
    dataset = load_dataset(args.data, gold=args.gold)
    samples = dataset.samples[: args.limit] if args.limit else dataset.samples
    factory, model, base_url, is_server = make_llm_factory(args)
    out = args.out or Path("runs/eval") / f"{_slug(model)}-{'all' if args.shots is None else args.shots}shots"
    settings = RunSettings(
        out=out,
        model=model,
        base_url=base_url,
        shots=args.shots,
        max_retries=args.max_retries,
        workers=args.workers if is_server else 1,
        offer_files=not args.no_files,
    )
    summary = run_predictions(samples, settings, factory, data=args.data, progress=not args.no_progress)
    result = score_run(dataset, samples, out)
    report = write_report(result, out)
    overall = result["groups"]["overall"]
    print(f"{summary.asked} asked, {summary.skipped} already predicted; report: {report}")
    print(
        f"node F1 {_fmt(overall['node_f1'])}, edge F1 {_fmt(overall['edge_f1'])}, "
        f"v-F1 {_fmt(overall['arg_v_f1'])}, invalid plans {_fmt(overall['invalid_share'])}"
    )
    if summary.backend_failures:
        print(
            f"{len(summary.backend_failures)} requests failed at the LLM backend (rerun to retry them); "
            f"first: {summary.backend_failures[0]}",
            file=sys.stderr,
        )
    if summary.aborted:
        print(summary.aborted, file=sys.stderr)
        return 1
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


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    sys.exit(main())
