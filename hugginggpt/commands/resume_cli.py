"""`python -m hugginggpt resume [--workdir DIR] [RUN_ID | TRACE.json]`: take up a run that died.

With no run named, the last unfinished run of the conversation folder (--workdir), or of every
conversation under the settings' workdir. It takes a request's flags (the LLM, where models run,
the catalog, --json) and prints what a request prints; exit code 0 when the resumed run answered,
1 when it failed, 2 for bad usage or no run to resume.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TextIO

from hugginggpt.commands import terminal
from hugginggpt.commands.terminal import follow_to_the_end, quiet_libraries, settings_from_args
from hugginggpt.run.journal import SUFFIX, JournalState, journal_path, read_journal, unfinished


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m hugginggpt resume",
        description="Take up a run that died (a crash, a kill, a reboot) where it stopped: the same "
        "plan, models and seeds; finished tasks are not run again.",
    )
    p.add_argument(
        "run",
        nargs="?",
        metavar="RUN_ID | TRACE.json",
        help="the run: its request id or its trace file (default: the last unfinished run)",
    )
    p.add_argument(
        "--workdir", metavar="DIR", help="the conversation's folder (default: every one under ./workspaces)"
    )
    terminal.add_run_arguments(p)
    terminal.add_llm_arguments(p)
    return p


def main(argv: list[str], *, stdout: TextIO, stderr: TextIO) -> int:
    from hugginggpt.factory import build_pipeline
    from hugginggpt.files.workspace import Workspace
    from hugginggpt.run.resume import resume

    args = parser().parse_args(argv)
    quiet_libraries(args)
    try:
        settings = settings_from_args(args)
        state = find_run(args.run, Path(args.workdir) if args.workdir else None, Path(settings.workdir))
        pipeline = build_pipeline(settings)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=stderr)
        return 2
    workspace = Workspace(state.path.parent.parent)
    crashes = state.crashes + 1
    print(
        f"Resuming {state.request_id} ({crashes} crash{'es' if crashes > 1 else ''} so far): "
        f"{len(state.finished)} task(s) had finished",
        file=stderr,
    )
    events = resume(pipeline, state, workspace=workspace)
    return follow_to_the_end(events, workspace.root, args.json, stdout=stdout, stderr=stderr)


def find_run(run: str | None, folder: Path | None, workdir: Path) -> JournalState:
    """The journal of the run named (a request id, a trace or a journal file), or the last
    unfinished one. ValueError says why there is none."""
    if run and (run.endswith(".json") or run.endswith(SUFFIX)):
        path = Path(run)
        return read_journal(path if run.endswith(SUFFIX) else journal_path(path))
    folders = [folder] if folder is not None else sorted(p for p in workdir.glob("*") if p.is_dir())
    if run:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,80}", run):
            raise ValueError(f"not a run id: {run[:80]!r}")
        for f in folders:
            path = f / "traces" / f"{run}{SUFFIX}"
            if path.is_file():
                return read_journal(path)
        raise ValueError(f"no journal of run {run!r} in {folder or workdir}")
    waiting = [s for f in folders for s in unfinished(f)]
    if not waiting:
        raise ValueError(f"no unfinished run in {folder or workdir}")
    return max(waiting, key=lambda s: s.request_id)
