"""What the commands share (`python -m hugginggpt`, its `replay`): the controller-LLM flags, settings
from them, and following a run's events in the terminal."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from .config import Settings, load_settings
from .events import AnswerDelta, Done, Event, TaskProgress
from .progress import describe


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
