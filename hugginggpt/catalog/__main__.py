"""`python -m hugginggpt.catalog refresh|check|list|show|add-space|add-mcp`: refresh from the Hub,
check models on it, look at the catalog, or add a Space's or an MCP server's tools to a catalog file."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from hugginggpt.tasks import TASKS


def default_out() -> Path:
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "hugginggpt" / "catalog.jsonl"


def cmd_refresh(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from hugginggpt.catalog.hub import (
        HubUnreachable,
        default_tasks,
        fetch,
        other_tasks_lines,
        write_user_file,
    )

    tasks = args.task or default_tasks()
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        print(f"error: unknown task(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    from huggingface_hub import constants

    from hugginggpt.catalog.hub import hub_queries

    for task in tasks:
        if not hub_queries(task):
            print(
                f"note: {task} has no Hub query (its models are annotators); the shipped entries stay",
                file=sys.stderr,
            )

    bar = tqdm(
        total=len(tasks) * args.limit,
        unit="model",
        desc="refresh",
        file=sys.stderr,
        disable=args.quiet or None,
    )

    def on_model(task: str, model_id: str) -> None:
        bar.set_postfix_str(task, refresh=False)
        bar.update()

    try:
        cards = list(fetch(tasks, limit=args.limit, card_text=not args.facts_only, on_model=on_model))
    except HubUnreachable as err:
        bar.close()
        print(
            f"error: cannot reach the Hugging Face Hub at {constants.ENDPOINT} ({err}); nothing was written",
            file=sys.stderr,
        )
        return 1
    bar.close()
    kept = other_tasks_lines(args.out, tasks)  # refreshing some tasks leaves the others' entries alone
    n = write_user_file(cards, args.out, keep=kept)
    print(
        f"wrote {n} models for {len(tasks)} task(s) to {args.out}"
        + (f", kept {len(kept)} entries of other tasks" if kept else "")
        + f"; use it with --catalog {args.out} or HUGGINGGPT_CATALOG={args.out}"
    )
    return 0


def _catalog_paths(args: argparse.Namespace) -> list[Path]:
    """$HUGGINGGPT_CATALOG (read with the other settings), then --catalog."""
    from hugginggpt.config import load_settings

    return [Path(p) for p in (*load_settings().catalog_paths, *(args.catalog or []))]


def cmd_check(args: argparse.Namespace) -> int:
    from huggingface_hub import constants

    from hugginggpt.catalog import load_catalog
    from hugginggpt.catalog.check import Wanted, check_models
    from hugginggpt.catalog.hub import HubUnreachable

    unknown = [t for t in args.task or () if t not in TASKS]
    if unknown:
        print(f"error: unknown task(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    catalog = load_catalog(_catalog_paths(args))
    for problem in catalog.problems:
        print(f"warning: {problem}", file=sys.stderr)
    if not args.task and not args.ids:  # the whole catalog, offline: does each entry do its task?
        from hugginggpt.catalog.quality import missing_facts, problems

        found = problems(catalog)
        note = missing_facts(catalog)
        print(
            "\n".join(
                found
                + ([f"note: {note}"] if note else [])
                + [f"checked {len(catalog)} entries: {len(found)} problems"]
            )
        )
        return 3 if found else 0
    wanted: list[Wanted] = []
    for model_id in args.ids:  # each task it is listed for (within --task); the Hub's task if none
        cards = [c for t in args.task or catalog.tasks() if (c := catalog.get(model_id, t))]
        wanted += [Wanted(c.id, c.task, c) for c in cards] or [
            Wanted(model_id, t) for t in args.task or [None]
        ]
    if not args.ids:
        for task in args.task:
            wanted += [Wanted(c.id, task, c) for c in catalog.candidates(task, k=args.k or sys.maxsize)]
    try:
        results = check_models(wanted)
    except HubUnreachable as err:
        print(f"error: cannot reach the Hugging Face Hub at {constants.ENDPOINT} ({err})", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([r.to_json() for r in results], ensure_ascii=False, indent=1))
    else:
        for result in results:
            print(result.line())
        missing = sum(r.exists is False for r in results)
        served = sum(bool(r.live) for r in results)
        print(
            f"checked {len(results)}: {missing} missing, {sum(bool(r.gated) for r in results)} gated, "
            f"{served} served live by a provider, {sum(r.local for r in results)} runnable locally"
            + (
                f", {broken} not a pipeline"
                if (broken := sum(bool(r.not_a_pipeline) for r in results))
                else ""
            )
        )
    return 3 if any(r.exists is False for r in results) else 0


def cmd_list(args: argparse.Namespace) -> int:
    from hugginggpt.catalog import load_catalog, prompt_lines

    catalog = load_catalog(_catalog_paths(args))
    for problem in catalog.problems:
        print(f"warning: {problem}", file=sys.stderr)
    if not args.task:
        for task in TASKS:
            cards = list(catalog.ranked(task))
            print(f"{task:32} {len(cards):5} models, {sum(c.local for c in cards):5} local")
        return 0
    for task in args.task:
        runnable = (lambda c: c.local) if args.local else None
        print(f"{task}:")
        cards = catalog.candidates(task, k=args.k, runnable=runnable)
        for line in prompt_lines(cards, max_tokens=args.max_tokens * max(1, len(cards))):
            print("  " + line)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from hugginggpt.catalog import load_catalog

    catalog = load_catalog(_catalog_paths(args))
    found = [c for t in catalog.tasks() if (c := catalog.get(args.id, t))]
    for card in found:
        print(json.dumps(card.to_json(), ensure_ascii=False, indent=2))
    if not found:
        print(f"error: {args.id!r} is not in the catalog", file=sys.stderr)
    return 0 if found else 1


def cmd_add_tool(args: argparse.Namespace) -> int:
    """add-space / add-mcp: the tools' entries, added to --out."""
    from hugginggpt.catalog.add_tool import entry, mcp_refs, read_raw, space_refs, write_entries
    from hugginggpt.config import load_settings

    token = load_settings().hf_token
    try:
        if args.command == "add-space":
            refs = space_refs(args.target, args.api, args.header, token)
        else:
            refs = mcp_refs(args.target, args.tool, args.header, token)
    except Exception as err:  # noqa: BLE001 (unreachable, refused, not a Gradio app or MCP server: told plainly)
        print(
            f"error: cannot read the tools of {args.target}: {str(err)[:400] or type(err).__name__}",
            file=sys.stderr,
        )
        return 1
    ids = {f"{r.kind}:{r.server}/{r.name}" for r in refs}
    taken = {str(e.get("task")) for e in read_raw(args.out) if e.get("id") not in ids and "tool" in e}
    entries = []
    for ref in refs:
        entries.append(entry(ref, own_task=args.own_task, taken=taken, license=args.license))
        taken.add(entries[-1]["task"])
    write_entries(entries, args.out)
    for e in entries:
        print(f"{e['id']}: task {e['task']}")
    print(
        f"wrote {len(entries)} tool(s) to {args.out}; review it, then use it with --catalog {args.out} "
        f"or HUGGINGGPT_CATALOG={args.out}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hugginggpt.catalog", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    refresh = sub.add_parser("refresh", help="pull live model facts from the Hub into a user catalog")
    refresh.add_argument("--task", action="append", help="a task type (repeatable; default: all)")
    refresh.add_argument("--limit", type=int, default=30, help="models per task (default 30)")
    refresh.add_argument("--out", type=Path, default=default_out(), help=f"default {default_out()}")
    refresh.add_argument("--facts-only", action="store_true", help="skip fetching each model card")
    refresh.add_argument("--quiet", action="store_true", help="no progress bar")
    refresh.set_defaults(run=cmd_refresh)
    check = sub.add_parser(
        "check",
        help="per model: still on the Hub, gated, which providers serve it, runnable locally "
        "(exit status 3 when one is missing); with no model or task named, every entry offline: "
        "does its library do its task, are its languages codes (exit status 3 on a problem)",
    )
    check.add_argument("ids", nargs="*", metavar="ID", help="model ids (default: the --task models)")
    check.add_argument("--task", action="append", help="a task type (repeatable)")
    check.add_argument("-k", type=int, default=0, help="only the top K of each task (default: all)")
    check.add_argument("--json", action="store_true", help="one JSON list instead of lines")
    check.add_argument("--catalog", type=Path, action="append", default=[], help="a user catalog file")
    check.set_defaults(run=cmd_check)
    for name, helptext in (
        ("list", "models per task, or the top ones of a task"),
        ("show", "one model's card"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--catalog", type=Path, action="append", default=[], help="a user catalog file")
        if name == "list":
            p.add_argument("--task", action="append")
            p.add_argument("-k", type=int, default=10)
            p.add_argument("--local", action="store_true", help="only models the local runtime can run")
            p.add_argument("--max-tokens", type=int, default=80, help="per model")
            p.set_defaults(run=cmd_list)
        else:
            p.add_argument("id")
            p.set_defaults(run=cmd_show)
    for name, what, item in (
        ("add-space", "a Gradio Space (OWNER/NAME) or any Gradio app's URL", "api"),
        ("add-mcp", "an MCP server's streamable HTTP URL, or a command that starts one over stdio", "tool"),
    ):
        p = sub.add_parser(name, help=f"add the tools of {what} to a user catalog")
        p.add_argument("target", help=what)
        p.add_argument(
            f"--{item}", action="append", default=[], metavar="NAME", help=f"only this {item} (repeatable)"
        )
        p.add_argument("--out", type=Path, default=default_out(), help=f"default {default_out()}")
        p.add_argument(
            "--header",
            action="append",
            default=[],
            metavar="NAME=${VAR}",
            help="sent to the server; the value from the environment",
        )
        p.add_argument(
            "--own-task",
            action="store_true",
            help="a task type of its own even where it fits an existing one",
        )
        p.add_argument(
            "--license", help="the tool's licence (a tool of unknown licence is refused under --licenses)"
        )
        p.set_defaults(run=cmd_add_tool)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
