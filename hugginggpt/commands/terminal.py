"""What the commands share (`python -m hugginggpt`, its `replay` and `resume`): the controller-LLM
and run flags, settings from them, following a run's events in the terminal, and its end (--json)."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from hugginggpt.commands.progress import describe
from hugginggpt.config import INFERENCE_MODES, Settings, load_settings
from hugginggpt.run.events import AnswerDelta, Done, Event, TaskProgress
from hugginggpt.run.run_json import run_json


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
        max_model_gb=getattr(args, "max_model_gb", None),
        max_download_gb=getattr(args, "max_download_gb", None),
        licenses=_licences(getattr(args, "licenses", None)),
        # --workdir (the conversation's folder) also holds the result cache and the learnt estimates,
        # so a command run from another directory finds them and writes nothing where it was run.
        workdir=getattr(args, "workdir", None),
    )


def _licences(raw: str | None) -> tuple[str, ...] | None:
    return tuple(x.strip() for x in raw.split(",") if x.strip()) if raw is not None else None


def follow(events: Iterable[Event], root: Path, *, stdout: TextIO, stderr: TextIO, stream: bool) -> Done:
    """Show a run's events as they come (stages on stderr, the answer streamed to stdout); its Done.

    A download's or a load's progress is one line redrawn in place when stderr is a terminal, and
    left out when it is not (a log wants no bars)."""
    done: Done | None = None
    streamed = ""
    bar = False  # a progress line is on stderr, to be cleared before the next line
    tty = stderr.isatty()
    for event in events:
        if isinstance(event, TaskProgress):
            if tty:
                stderr.write(f"\r{describe(event, root)}\x1b[K")
                stderr.flush()
                bar = True
            continue
        if bar:
            stderr.write("\r\x1b[K")
            bar = False
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


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The flags every command that runs models shares (a request, `resume`): --json, where models
    run, the catalog, the limits."""
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
    limits = p.add_argument_group("limits on the models a request may use (0: none)")
    limits.add_argument(
        "--max-model-gb",
        type=float,
        metavar="GB",
        help="the largest model to run here (HUGGINGGPT_MAX_MODEL_GB)",
    )
    limits.add_argument(
        "--max-download-gb",
        type=float,
        metavar="GB",
        help="the most one request may download (HUGGINGGPT_MAX_DOWNLOAD_GB)",
    )
    limits.add_argument(
        "--licenses",
        metavar="LIST",
        help="the model licences allowed, e.g. mit,apache-2.0 (HUGGINGGPT_LICENSES)",
    )
    p.add_argument(
        "--verbose", action="store_true", help="also the model libraries' warnings and loading bars"
    )


def follow_to_the_end(
    events: Iterable[Event], root: Path, as_json: bool, *, stdout: TextIO, stderr: TextIO
) -> int:
    """A run followed in the terminal (the answer streamed unless --json) and finished: its exit code."""
    done = follow(events, root, stdout=stdout, stderr=stderr, stream=not as_json)
    return finish(done, as_json, stdout=stdout, stderr=stderr)


def quiet_libraries(args: argparse.Namespace) -> None:
    """Unless --verbose, no warnings or loading bars of the model libraries (read when transformers
    is imported; models_local then hides its bars too)."""
    if not args.verbose:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


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
    """The --json contract (hugginggpt.run.run_json's shape, which the API and MCP share), plus trace_file."""
    return {**run_json(done), "trace_file": str(done.trace_file) if done.trace_file else None}
