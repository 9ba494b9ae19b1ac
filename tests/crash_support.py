"""The crash harness, shared by tests/test_crash_resume.py and bench/crash_resume.py: real processes
and `kill -9`.

In this process: the fake LLM (streaming every reply at a token rate) and the expert server's HTTP
app (models_local.serve under uvicorn) over a backend whose models take fixed times and count their
calls. A request runs as `python -m hugginggpt` in a process of its own, which is killed (SIGKILL)
at a point of the run; then `python -m hugginggpt resume` takes it up, and the harness counts what
ran again at the expert server and at the LLM.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import wave
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fakes.llm_server import FakeLLMServer, Reply
from PIL import Image
from serve_support import protocol_server

from hugginggpt.run.journal import JournalState, journals, read_journal
from models_local.serve import create_app
from models_local.serve.jobs import Job, Output
from models_local.serve.jobs import Reply as JobReply
from models_local.serve.models import ModelTable

ROOT = Path(__file__).resolve().parent.parent
CHARS_PER_TOKEN = 4
REQUEST = "draw a fox, describe it, read the description aloud and classify the picture"
PLAN = [
    {
        "task": "text-to-image",
        "id": 0,
        "dep": [-1],
        "args": {"text": "a red fox jumping over a frozen river"},
    },
    {"task": "image-to-text", "id": 1, "dep": [0], "args": {"image": "<resource>-0"}},
    {"task": "text-to-speech", "id": 2, "dep": [1], "args": {"text": "<resource>-1"}},
    {"task": "image-classification", "id": 3, "dep": [0], "args": {"image": "<resource>-0"}},
]
MODELS = {
    "text-to-image": ["crash/t2i-big", "crash/t2i-small"],
    "image-to-text": ["crash/caption"],
    "text-to-speech": ["crash/speech"],
    "image-classification": ["crash/classify"],
}
PICKS = {"0": {"id": "crash/t2i-small", "reason": "small is enough for a sketch"}}
ANSWER = (
    "I drew a red fox over a frozen river, described the picture, read the description aloud and "
    "classified the picture; the files are above, and each step is listed in the plan."
)


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 80, 40)).save(out, format="PNG")
    return out.getvalue()


def _wav() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as clip:
        clip.setnchannels(1)
        clip.setsampwidth(2)
        clip.setframerate(8000)
        clip.writeframes(b"\x00\x00" * 800)
    return out.getvalue()


OUTPUTS = {
    "text-to-image": [Output("image", data=_png(), suffix=".png")],
    "text-to-speech": [Output("audio", data=_wav(), suffix=".wav")],
    "image-classification": [Output("data", value=[{"label": "fox", "score": 0.9}])],
    "image-to-text": [Output("text", value="a red fox jumps over a frozen river")],
}


class Experts:
    """The expert server's backend: each task takes a fixed time; calls are counted as they start
    and end (an end is a reply sent)."""

    name = "fixed-time"

    def __init__(self, seconds: dict[str, float]) -> None:
        self.seconds = seconds
        self.log: list[tuple[float, str, str]] = []  # (time.monotonic(), "start" | "end", task)
        self.lock = threading.Lock()

    async def run(self, job: Job, stop: Any) -> JobReply:
        self._note("start", job.task)
        await asyncio.sleep(self.seconds[job.task])
        self._note("end", job.task)
        return JobReply(outputs=OUTPUTS[job.task])

    def resident(self) -> list[dict[str, Any]]:
        return []

    def _note(self, what: str, task: str) -> None:
        with self.lock:
            self.log.append((time.monotonic(), what, task))

    def started(self, since: int = 0) -> Counter[str]:
        with self.lock:
            return Counter(task for _, what, task in self.log[since:] if what == "start")


@dataclass(frozen=True)
class Point:
    """Where to kill: `delay` seconds after `trigger` (plan / respond: that LLM call arrived;
    start:<task> / end:<task>: the expert server began / answered that task; save:N: the Nth write
    of a journal line or a trace file was seen)."""

    name: str
    trigger: str
    delay: float = 0.0


@dataclass
class Outcome:
    point: Point
    killed: bool  # the run was killed before it ended
    where: str  # what the journal held at the kill
    finished_before: list[str]  # tasks journaled as finished before the kill
    ran_again: list[str]  # of those, the ones the expert server ran again
    llm_after: list[str]  # the LLM calls after the restart, by stage
    llm_expected: list[str]  # the calls that had not ended before the kill
    answered: bool
    records_read: bool
    resume_seconds: float  # from the restart to the answer, the process's start included
    run_seconds: float  # the resumed run's own (its trace's total): no process start, no imports
    torn: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        llm_ok = sorted(self.llm_after) == sorted(self.llm_expected)
        return self.killed and not self.ran_again and self.answered and self.records_read and llm_ok


class Harness:
    """One fake LLM and one expert server for many crashes; each run in a folder of its own."""

    def __init__(self, root: Path, *, rate: float, seconds: dict[str, float]) -> None:
        self.root = root
        self.rate = rate
        self.experts = Experts(seconds)
        self._stack = ExitStack()
        self.llm = self._stack.enter_context(FakeLLMServer())
        self.experts_url = self._stack.enter_context(
            protocol_server(create_app(self.experts, ModelTable(models_dir=None, hub=True)))
        )
        self.catalog = root / "catalog.jsonl"
        self.catalog.write_text(
            "".join(
                json.dumps({"id": m, "task": task, "downloads": 10**12 - i, "description": f"{task} model"})
                + "\n"
                for task, ids in MODELS.items()
                for i, m in enumerate(ids)
            )
        )
        self.runs = 0

    def close(self) -> None:
        self._stack.close()

    def script(self) -> None:
        self.llm.reset()
        self.llm.script("plan", self._streamed(json.dumps({"tasks": PLAN})))
        self.llm.script("select", self._streamed(json.dumps(PICKS)))
        self.llm.script("respond", self._streamed(ANSWER))

    def _streamed(self, text: str) -> Reply:
        return Reply(text, chunk_chars=CHARS_PER_TOKEN, chunk_delay=1.0 / self.rate, delay=0.1)

    def command(self, folder: Path, *args: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "hugginggpt",
            *args,
            "--workdir",
            str(folder),
            "--json",
            "--llm-base-url",
            self.llm.url,
            "--llm-model",
            "fake",
            "--llm-api-key",
            "x",
            "--inference",
            "remote",
            "--catalog",
            str(self.catalog),
            "--top-k",
            "2",
        ]

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HF_HUB_OFFLINE": "1",
            "HUGGINGGPT_EXPERTS_URL": self.experts_url,
            "HUGGINGGPT_CACHE_MAX_BYTES": "0",  # what is not run again is the journal's doing alone
        }

    def run_plain(self) -> tuple[float, float]:
        """A whole request from the start (what a plain retry costs): its seconds, the process's
        start included, and the run's own."""
        self.script()
        self.runs += 1
        folder = self.root / f"plain-{self.runs}"
        t0 = time.monotonic()
        done = subprocess.run(
            [*self.command(folder), REQUEST], env=self.env(), capture_output=True, text=True, timeout=120
        )
        seconds = time.monotonic() - t0
        assert done.returncode == 0, done.stderr[-3000:]
        return seconds, _own_seconds(json.loads(done.stdout))

    def crash_and_resume(self, point: Point) -> Outcome:
        self.script()
        self.runs += 1
        folder = self.root / f"run-{self.runs}"
        mark = len(self.experts.log)
        proc = subprocess.Popen(
            [*self.command(folder), REQUEST],
            env=self.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            self._wait_for(point, proc, folder, mark)
            killed = proc.poll() is None
            if killed:
                os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(30)
        before = _state(folder)
        llm_mark = len(self.llm.requests)
        expert_mark = len(self.experts.log)
        t0 = time.monotonic()
        done = subprocess.run(
            self.command(folder, "resume"), env=self.env(), capture_output=True, text=True, timeout=120
        )
        seconds = time.monotonic() - t0
        result = json.loads(done.stdout) if done.stdout.strip() else {}
        return Outcome(
            point=point,
            killed=killed,
            **self.counted(before, llm_mark, expert_mark),
            answered=result.get("outcome") == "answered" and bool(result.get("answer")),
            records_read=_records_read(folder),
            resume_seconds=seconds,
            run_seconds=_own_seconds(result),
            torn=bool(before and before.torn),
            errors=[done.stderr[-2000:]] if done.returncode else [],
        )

    def counted(self, before: Any, llm_mark: int, expert_mark: int) -> dict[str, Any]:
        """What the journal held at the kill (`before`), beside what ran after the marks: the tasks
        the expert server ran again and the LLM calls made, with the calls that had not ended."""
        finished = sorted(PLAN[i]["task"] for i in before.finished) if before else []
        again = self.experts.started(expert_mark)
        return {
            "where": _where(before),
            "finished_before": finished,
            "ran_again": [t for t in finished if again[t]],
            "llm_after": [r["stage"] for r in self.llm.requests[llm_mark:]],
            "llm_expected": _expected_calls(before),
        }

    def _wait_for(self, point: Point, proc: subprocess.Popen, folder: Path, mark: int) -> None:
        """Until the trigger, then `delay` more seconds; returns early when the run ended."""
        end = time.monotonic() + 60
        sizes: dict[Path, int] = {}
        at: float | None = None
        while at is None:
            if proc.poll() is not None or time.monotonic() > end:
                return
            at = self._triggered(point.trigger, folder, mark, sizes)
            if at is None:
                time.sleep(0.0005)
        while time.monotonic() < at + point.delay:
            time.sleep(0.0005)

    def _triggered(self, trigger: str, folder: Path, mark: int, sizes: dict[Path, int]) -> float | None:
        kind, _, task = trigger.partition(":")
        if kind in ("plan", "respond"):
            return time.monotonic() if kind in self.llm.stages() else None
        if kind in ("start", "end"):
            with self.experts.lock:
                hits = [t for t, what, name in self.experts.log[mark:] if what == kind and name == task]
            return hits[0] if hits else None
        # save:N: the Nth write seen (a journal line appended, or a trace being replaced)
        traces = folder / "traces"
        if not traces.is_dir():
            return None
        for path in list(traces.iterdir()):
            try:
                size = path.stat().st_size
            except FileNotFoundError:  # a trace's .part, renamed meanwhile
                continue
            if path.name.endswith(".part") or sizes.get(path, 0) != size:
                sizes[path] = size
                sizes[traces] = sizes.get(traces, 0) + 1
        return time.monotonic() if sizes.get(traces, 0) >= int(task or 1) else None


def _own_seconds(result: dict[str, Any]) -> float:
    """A run's own seconds, from its trace (the --json output names it)."""
    try:
        return float(json.loads(Path(result["trace_file"]).read_text())["timings"]["total"])
    except (KeyError, TypeError, OSError, ValueError):
        return float("nan")


def _state(folder: Path) -> JournalState | None:
    found = journals(folder) if folder.is_dir() else []
    return read_journal(found[-1]) if found else None


def _where(state: JournalState | None) -> str:
    if state is None:
        return "before the run began"
    if state.plan is None:
        return f"plan stream ({len(state.planned)} of {len(PLAN)} tasks in)"
    done = len(state.finished)
    if done < len(PLAN):
        return f"executing ({done} of {len(PLAN)} tasks done)"
    return "answer"


def _expected_calls(state: JournalState | None) -> list[str]:
    """The LLM calls a resume has to make: those that had not ended. A plan cut off is continued
    (one call); the selection call is made again when a task has no choice yet (with --top-k 2
    every task has a real one: its model here and one of the shipped catalog's); the answer always."""
    if state is None or state.start == {}:
        return ["plan", "select", "respond"]
    calls = []
    if state.plan is None:
        calls.append("plan")
    if any(t["id"] not in state.choices for t in PLAN):
        calls.append("select")
    return [*calls, "respond"]


def _records_read(folder: Path) -> bool:
    """Every journal and trace of the conversation reads."""
    try:
        for path in journals(folder):
            read_journal(path)
        for path in (folder / "traces").glob("*.json"):
            json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return True


@contextmanager
def harness(root: Path, *, rate: float, seconds: dict[str, float]) -> Iterator[Harness]:
    h = Harness(root, rate=rate, seconds=seconds)
    try:
        yield h
    finally:
        h.close()
