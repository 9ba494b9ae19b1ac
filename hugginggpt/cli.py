"""Command line: `python -m hugginggpt [options] "request"`, and `python -m hugginggpt replay ...`.

Stages go to stderr as they happen; the answer goes to stdout (streamed), or with --json one JSON
object: {answer, error, llm_calls, tasks: [{id, task, model, status, error, cached, seed, outputs}],
trace_file}. `--plan-only` prints the checked plan with its models instead of running it (with
--json: {request, plan, choices}); `--plan FILE` runs such a file; `--review` asks before running.
Exit code 0 on success, 1 when the request failed (or the plan was not run), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any, TextIO

from .artifacts import Artifact
from .config import INFERENCE_MODES, Settings, load_settings
from .events import (
    AnswerDelta,
    Done,
    Event,
    ModelSelected,
    Outcome,
    PlanReady,
    PlanRejected,
    StageStarted,
    TaskFailed,
    TaskFinished,
    TaskSkipped,
    TaskStarted,
)
from .planfile import PlanFileError, read_plan_file, to_json
from .review import plan_lines
from .review import review as ask


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """The controller-LLM flags, shared by every command that talks to the LLM."""
    group = parser.add_argument_group("controller LLM")
    group.add_argument(
        "--llm-base-url", metavar="URL", help="an OpenAI-compatible server, e.g. http://localhost:8000/v1"
    )
    group.add_argument("--llm-model", metavar="NAME", help="the model name the server knows")
    group.add_argument(
        "--llm-api-key", metavar="KEY", help="API key (default: HUGGINGGPT_LLM_API_KEY or OPENAI_API_KEY)"
    )
    group.add_argument("--config", metavar="FILE", help="a YAML settings file (default: HUGGINGGPT_CONFIG)")


def settings_from_args(args: argparse.Namespace) -> Settings:
    settings = load_settings(getattr(args, "config", None))
    return settings.with_overrides(
        llm_base_url=args.llm_base_url,
        llm_model=args.llm_model,
        llm_api_key=args.llm_api_key,
        inference=getattr(args, "inference", None),
        top_k=getattr(args, "top_k", None),
        catalog_paths=tuple(settings.catalog_paths) + tuple(getattr(args, "catalog", None) or ()) or None,
        allow_urls=True if getattr(args, "allow_urls", False) else None,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m hugginggpt",
        description="Answer a request by planning tasks, choosing Hugging Face models and running them.",
        epilog="Run a saved trace again: python -m hugginggpt replay TRACE.json (see replay --help).",
    )
    p.add_argument(
        "request", nargs="?", help="what you want, in plain language (may come from the --plan file)"
    )
    p.add_argument(
        "--file", action="append", default=[], metavar="PATH", help="an image or audio file (repeatable)"
    )
    p.add_argument(
        "--workdir", metavar="DIR", help="the conversation's folder (default: a new one under ./workspaces)"
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON object on stdout instead of the answer"
    )
    p.add_argument("--inference", choices=INFERENCE_MODES, help="where models run (default: hybrid)")
    p.add_argument(
        "--catalog", action="append", metavar="PATH", help="a catalog file adding models (repeatable)"
    )
    p.add_argument(
        "--top-k", type=int, metavar="K", help="candidates per task offered to the LLM (default 5)"
    )
    p.add_argument("--allow-urls", action="store_true", help="let plans fetch public http(s) URLs")
    p.add_argument(
        "--verbose", action="store_true", help="also the model libraries' warnings and loading bars"
    )
    plans = p.add_mutually_exclusive_group()
    plans.add_argument(
        "--plan-only", action="store_true", help="print the checked plan and its models; run nothing"
    )
    plans.add_argument(
        "--review", action="store_true", help="show the plan and ask before running it (a terminal)"
    )
    p.add_argument(
        "--plan", metavar="FILE", help="run this plan (what --plan-only --json prints) without planning"
    )
    add_llm_arguments(p)
    return p


def main(
    argv: list[str] | None = None,
    *,
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
    stdin: TextIO = sys.stdin,
) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["replay"]:
        from .replay import main as replay

        return replay(argv[1:], stdout=stdout, stderr=stderr)
    p = parser()
    args = p.parse_args(argv)
    if not args.verbose:  # read when transformers is imported; models_local then hides its bars too
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if not args.request and not args.plan:
        p.error("the request is missing")
    try:
        settings = settings_from_args(args)
        files = [Path(f) for f in args.file]
        for f in files:
            if not f.is_file():
                raise ValueError(f"no such file: {f}")
        review = args.review or (settings.review and not args.plan_only)
        if review and not stdin.isatty():
            raise ValueError(
                "--review asks before running, so it needs a terminal; without one, use --plan-only "
                "--json > plan.json to see the plan, then --plan plan.json to run it"
            )
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=stderr)
        return 2

    from .factory import build_pipeline
    from .workspace import Workspace

    try:
        workspace = (
            Workspace(Path(args.workdir)) if args.workdir else Workspace.create(Path(settings.workdir))
        )
    except OSError as e:  # a file where the folder belongs, no permission, ...
        print(f"error: cannot use {args.workdir or settings.workdir} as the workspace: {e}", file=stderr)
        return 2
    try:
        pipeline = build_pipeline(settings)
    except ValueError as e:  # e.g. a base URL that is not a URL
        print(f"error: {e}", file=stderr)
        return 2
    for problem in getattr(pipeline.catalog, "problems", []):
        print(f"catalog: {problem}", file=stderr)
    try:
        given = read_plan_file(Path(args.plan), pipeline.catalog) if args.plan else None
    except PlanFileError as e:
        print(f"error: {e}", file=stderr)
        return 2
    request = args.request or (given.request if given else None)
    if not request:
        print('error: the request is missing: give it, or put it in the plan file as "request"', file=stderr)
        return 2
    print(f"LLM: {pipeline.llm.describe()}; models: {pipeline.endpoint.describe()}", file=stderr)

    if args.plan_only or review:  # plan and select (or check the given plan), run nothing yet
        if given is not None:
            events = pipeline.run_plan(
                request,
                given.plan,
                given.choices,
                workspace=workspace,
                seeds=given.seeds,
                plan_only=True,
                files=files,
            )
        else:
            events = pipeline.plan_only(request, workspace=workspace, files=files)
        planned = follow(events, workspace.root, stdout=stdout, stderr=stderr, stream=False)
        if not planned.ok or planned.plan is None:
            return finish(planned, args.json, stdout=stdout, stderr=stderr)
        if args.plan_only:
            if args.json:
                json.dump(to_json(planned.plan, planned.choices, request), stdout, ensure_ascii=False)
            else:
                stdout.write("\n".join(plan_lines(planned.plan, planned.choices)))
            stdout.write("\n")
            return 0
        check = partial(pipeline.check_plan, workspace=workspace)
        given = ask(
            request,
            planned.plan,
            planned.choices,
            catalog=pipeline.catalog,
            check=check,
            stdin=stdin,
            out=stderr,
        )
        if given is None:
            print("Cancelled: nothing was run.", file=stderr)
            return 1
        files = []  # already in the workspace
    if given is not None:
        events = pipeline.run_plan(
            request, given.plan, given.choices, workspace=workspace, seeds=given.seeds, files=files
        )
    else:
        events = pipeline.run(request, workspace=workspace, files=files)
    done = follow(events, workspace.root, stdout=stdout, stderr=stderr, stream=not args.json)
    return finish(done, args.json, stdout=stdout, stderr=stderr)


def follow(events: Iterable[Event], root: Path, *, stdout: TextIO, stderr: TextIO, stream: bool) -> Done:
    """Show a run's events as they come (stages on stderr, the answer streamed to stdout); its Done."""
    done: Done | None = None
    streamed = ""
    for event in events:
        if isinstance(event, AnswerDelta) and stream:
            stdout.write(event.text)
            stdout.flush()
            streamed = streamed[-1:] + event.text
        if isinstance(event, Done) and streamed and not streamed.endswith("\n"):
            stdout.write("\n")  # the answer's line ends before the [done] line, in a terminal too
            stdout.flush()
            streamed = "\n"
        line = describe(event, root)
        if line:
            print(line, file=stderr, flush=True)
        if isinstance(event, Done):
            done = event
    assert done is not None
    if stream and done.answer and not streamed:  # an answer that came whole, with no delta
        stdout.write(done.answer + ("" if done.answer.endswith("\n") else "\n"))
    return done


def finish(done: Done, as_json: bool, *, stdout: TextIO, stderr: TextIO) -> int:
    if as_json:
        json.dump(result_json(done), stdout, ensure_ascii=False)
        stdout.write("\n")
    if done.incomplete:
        print(f"note: the answer is incomplete: {done.incomplete}", file=stderr)
    if done.error:
        print(f"error: {done.error}", file=stderr)
    return 0 if done.ok else 1


def result_json(done: Done) -> dict[str, Any]:
    """The --json contract: {answer, error, llm_calls, tasks, trace_file}, plus outcome and error_kind."""
    return {
        "answer": done.answer,
        "error": done.error,
        "outcome": str(done.outcome),
        "error_kind": done.error_kind and str(done.error_kind),
        "answer_incomplete": done.incomplete,
        "llm_calls": done.llm_calls,
        "tasks": [
            {
                "id": r.id,
                "task": r.task,
                "model": r.model,
                "status": str(r.status),
                "error": r.error,
                "cached": r.cached,
                "seed": r.seed,
                "outputs": [_output_json(a) for a in r.outputs],
            }
            for r in done.records
        ],
        "trace_file": str(done.trace_file) if done.trace_file else None,
    }


def _output_json(artifact: Artifact) -> dict[str, Any]:
    if artifact.path is not None:
        return {"kind": str(artifact.kind), "path": str(Path(artifact.path).resolve())}
    return {"kind": str(artifact.kind), "value": artifact.value}


def describe(event: Event, root: Path) -> str | None:
    """One line per event for the terminal."""
    match event:
        case StageStarted(stage=stage):
            return f"[{stage}] ..."
        case PlanRejected(attempt=attempt, problems=problems):
            return f"[plan] attempt {attempt} rejected, asking for a fix: " + "; ".join(problems)
        case PlanReady(plan=plan):
            if not plan.tasks:
                return "[plan] no model needed: answering directly"
            steps = ", ".join(f"{t.id}:{t.task}" + (f"<-{t.dep}" if t.dep else "") for t in plan.tasks)
            return f"[plan] {len(plan)} task(s): {steps}"
        case ModelSelected(task_id=i, task=task, model=model, reason=reason):
            return f"[select] task {i} {task}: {model} ({reason})"
        case TaskStarted(task_id=i, task=task, model=model, attempt=attempt):
            return f"[task {i}] {task} with {model}" + (f" (attempt {attempt})" if attempt > 1 else "")
        case TaskFinished(task_id=i, outputs=outputs, seconds=seconds, cached=cached, seed=seed):
            how = " from the cache" if cached else ""
            seeded = f" (seed {seed})" if seed is not None else ""
            return f"[task {i}] done{how} in {seconds:.2f} s{seeded}: " + "; ".join(
                a.describe(root)[:120] for a in outputs
            )
        case TaskFailed(task_id=i, model=model, error=error, final=final):
            return f"[task {i}] {model or 'task'} failed: {error}" + (
                "" if final else "; trying the next model"
            )
        case TaskSkipped(task_id=i, reason=reason):
            return f"[task {i}] skipped: {reason}"
        case Done(outcome=Outcome.PLANNED, llm_calls=calls):  # [done] is for the run, printed once
            return f"[plan] ready: {calls} LLM call(s)"
        case Done(outcome=outcome, trace=trace) as done:
            seconds = trace.get("timings", {}).get("total", 0)
            ending = "" if done.ok else f" ({outcome})"
            return f"[done] {done.llm_calls} LLM call(s), {seconds:.2f} s{ending}"
    return None
