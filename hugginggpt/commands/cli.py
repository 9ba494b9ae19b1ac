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
import sys
from functools import partial
from pathlib import Path
from typing import TextIO

from hugginggpt.commands.review import plan_lines
from hugginggpt.commands.review import review as ask
from hugginggpt.commands.terminal import (
    add_llm_arguments,
    add_run_arguments,
    finish,
    follow,
    follow_to_the_end,
    quiet_libraries,
    settings_from_args,
)
from hugginggpt.stages.planfile import PlanFileError, read_plan_file, to_json


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m hugginggpt",
        description="Answer a request by planning tasks, choosing Hugging Face models and running them.",
        epilog="Run a saved trace again: python -m hugginggpt replay TRACE.json (see replay --help). "
        "Take up a run that died where it stopped: python -m hugginggpt resume (see resume --help).",
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
    add_run_arguments(p)
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
        from hugginggpt.commands.replay import main as replay

        return replay(argv[1:], stdout=stdout, stderr=stderr)
    if argv[:1] == ["resume"]:
        from hugginggpt.commands.resume_cli import main as resume

        return resume(argv[1:], stdout=stdout, stderr=stderr)
    p = parser()
    args = p.parse_args(argv)
    quiet_libraries(args)
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

    from hugginggpt.factory import build_pipeline
    from hugginggpt.files.workspace import Workspace

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
    try:  # made only once the command is known to be good: a refused one leaves no empty folder
        workspace = (
            Workspace(Path(args.workdir)) if args.workdir else Workspace.create(Path(settings.workdir))
        )
    except OSError as e:  # a file where the folder belongs, no permission, ...
        print(f"error: cannot use {args.workdir or settings.workdir} as the workspace: {e}", file=stderr)
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
    return follow_to_the_end(events, workspace.root, args.json, stdout=stdout, stderr=stderr)
