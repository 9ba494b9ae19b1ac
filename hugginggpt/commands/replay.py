"""`python -m hugginggpt replay TRACE.json [--workdir DIR] [--json] [--no-answer]`.

Runs a trace's plan again with the models that produced its outputs and the same seeds: no planning
call, no selection call, no result cache (every task runs); the answer call unless --no-answer.
Then says, per task, whether the outputs match the recorded ones by content hash: the regression
test to run after upgrading a model or the project. Exit code 0 when every task that finished
before finishes again with the same outputs, 1 otherwise, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any, TextIO

from hugginggpt.files.hashing import artifact_sha256
from hugginggpt.run.events import Done
from hugginggpt.run.records import TaskStatus
from hugginggpt.run.traces import Trace, read_trace
from hugginggpt.stages.planfile import GivenPlan


def parser() -> argparse.ArgumentParser:
    from hugginggpt.commands.terminal import add_llm_arguments
    from hugginggpt.config import INFERENCE_MODES

    p = argparse.ArgumentParser(
        prog="python -m hugginggpt replay",
        description="Run a trace's plan again with its models and seeds; compare the outputs.",
    )
    p.add_argument("trace", metavar="TRACE.json", help="a trace a run wrote (its workspace's traces/)")
    p.add_argument(
        "--workdir", metavar="DIR", help="the conversation folder to run in (default: the trace's own)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--no-answer", action="store_true", help="run the tasks only: no LLM call at all")
    p.add_argument("--inference", choices=INFERENCE_MODES, help="where models run (default: hybrid)")
    p.add_argument(
        "--catalog", action="append", metavar="PATH", help="a catalog file with the trace's models"
    )
    add_llm_arguments(p)
    return p


def main(argv: list[str], *, stdout: TextIO, stderr: TextIO) -> int:
    from hugginggpt.commands.terminal import follow, settings_from_args
    from hugginggpt.factory import build_pipeline
    from hugginggpt.files.workspace import Workspace

    args = parser().parse_args(argv)
    trace_path = Path(args.trace)
    try:
        settings = settings_from_args(args)
        home = _trace_workspace(trace_path)
        if args.workdir:
            workspace = Workspace(Path(args.workdir))
        else:
            workspace = home or Workspace.create(Path(settings.workdir))
        pipeline = build_pipeline(settings)
        trace = read_trace(trace_path, pipeline.catalog)
    except (ValueError, OSError) as e:  # PlanFileError is a ValueError
        print(f"error: {e}", file=stderr)
        return 2
    given = trace.given
    if home is not None and home.root != workspace.root:
        _copy_named_files(given, home, workspace)
    print(f"replaying {trace.request_id or trace_path.name}: {len(given.plan)} task(s)", file=stderr)
    events = pipeline.rerun(
        given,
        workspace=workspace,
        answer=not args.no_answer,
        use_cache=False,
        header={"replay_of": trace.request_id},
    )
    done = follow(events, workspace.root, stdout=stdout, stderr=stderr, stream=not args.json)
    rows = compare(trace, done)
    for row in rows:
        print(describe_row(row), file=stderr)
    same = done.ok and all(row["match"] is not False for row in rows)
    if args.json:
        out = {
            "outcome": str(done.outcome),
            "error": done.error,
            "answer": done.answer,
            "llm_calls": done.llm_calls,
            "same": same,
            "tasks": rows,
            "trace_file": str(done.trace_file) if done.trace_file else None,
        }
        json.dump(out, stdout, ensure_ascii=False)
        stdout.write("\n")
    if done.error:
        print(f"error: {done.error}", file=stderr)
    return 0 if same else 1  # (the run's [done] summary was printed by `follow`, once)


def compare(trace: Trace, done: Done) -> list[dict[str, Any]]:
    """Per task: the recorded and the new output hashes, and whether they match (None: nothing was
    recorded to compare with, because the task did not finish then or the trace has no hashes)."""
    rows = []
    for record in done.records:
        before = None
        if record.id in trace.recorded:
            before = [[kind, sha256] for kind, sha256 in trace.recorded[record.id]]
        after = None
        if record.status is TaskStatus.DONE:
            after = [[str(a.kind), artifact_sha256(a)] for a in record.outputs]
        if before is None or any(h is None for _, h in before):
            match = None
        else:
            match = before == after
        rows.append(
            {
                "id": record.id,
                "task": record.task,
                "model": record.model,
                "seed": record.seed,
                "status": str(record.status),
                "error": record.error,
                "match": match,
                "recorded": before,
                "replayed": after,
            }
        )
    return rows


def describe_row(row: dict[str, Any]) -> str:
    verdict = {True: "same outputs", False: "DIFFERENT outputs", None: "nothing recorded to compare"}
    seed = f", seed {row['seed']}" if row["seed"] is not None else ""
    status = "" if row["status"] == "done" else f" ({row['status']}: {row['error']})"
    return (
        f"[replay] task {row['id']} {row['task']} with {row['model']}{seed}: {verdict[row['match']]}{status}"
    )


def _trace_workspace(trace_path: Path):
    """The workspace the trace was written in (its traces/ folder), if it is one."""
    from hugginggpt.files.workspace import Workspace

    root = trace_path.resolve().parent.parent
    if trace_path.resolve().parent.name == "traces" and (root / "uploads").is_dir():
        return Workspace(root)
    return None


def _copy_named_files(given: GivenPlan, home: Any, workspace: Any) -> None:
    """Uploads and earlier outputs the plan names, copied from the trace's workspace to the new one."""
    for task in given.plan.tasks:
        for value in task.args.values():
            name = value.strip().lstrip("/")
            if not name or "<resource>-" in name or "://" in name or "\x00" in name:
                continue
            for source, target in (
                (home.uploads_dir / name, workspace.uploads_dir / name),
                (home.root / name, workspace.root / name),
            ):
                if home.contains(source) and source.is_file() and workspace.contains(target):
                    if not target.exists():
                        target.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(source, target)
                    break
