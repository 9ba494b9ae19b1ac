"""The crash harness for the app (tests/test_crash_resume_app.py, bench/crash_resume.py): `python
app.py` in a process of its own, a request typed into its page in headless Chromium, the app killed
with SIGKILL at a point of the run, then started again on the same work folder. The fake LLM and the
expert server (models that take fixed times, their calls counted) are crash_support's.

A chat request is what an app restart can continue: the API door's calls are stateless (their
workspace is deleted when the call ends), so nothing of them outlives the app.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crash_support import ANSWER, REQUEST, ROOT, Harness, Point

from hugginggpt.run.journal import JournalState, read_journal

START_SECONDS = 120  # an app's start on a loaded 2-core machine (imports, catalog, launch)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class App:
    process: subprocess.Popen
    port: int
    started: float  # time.monotonic() of the process's start
    ready: float = 0.0  # seconds from its start until it answered HTTP

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def kill(self) -> bool:
        """SIGKILL; False when it had already ended."""
        alive = self.process.poll() is None
        if alive:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        return alive


@dataclass
class AppOutcome:
    point: Point
    killed: bool
    where: str
    finished_before: list[str]
    ran_again: list[str]
    llm_after: list[str]
    llm_expected: list[str]
    continued: bool  # the restarted app took the run up on its own (resume_on_start)
    answered: bool
    records_read: bool
    restart_to_answer: float  # from the restarted app's process start to the answer saved
    app_start: float  # of which the app's start (imports, catalog, launch), until it answered HTTP

    @property
    def ok(self) -> bool:
        llm_ok = sorted(self.llm_after) == sorted(self.llm_expected)
        return (
            self.killed
            and self.continued
            and not self.ran_again
            and self.answered
            and self.records_read
            and llm_ok
        )


class AppHarness(Harness):
    """Harness's fake LLM and expert server, with the app as the process that is killed. Every app
    it started and a failed test left running is killed at close()."""

    def __init__(self, root: Path, *, rate: float, seconds: dict[str, float]) -> None:
        super().__init__(root, rate=rate, seconds=seconds)
        self.apps: list[App] = []

    def close(self) -> None:
        for app in self.apps:
            app.kill()
        super().close()

    def start_app(self, workdir: Path, *, resume_on_start: bool = True, port: int | None = None) -> App:
        """The app on `port` (None: a free one; a browser keeps its store per address, so the
        same port is the same app to a page)."""
        port = port or free_port()
        env = {
            **self.env(),
            "GRADIO_SERVER_NAME": "127.0.0.1",
            "GRADIO_SERVER_PORT": str(port),
            "GRADIO_TEMP_DIR": str(workdir.parent / "gradio"),
            "HUGGINGGPT_WORKDIR": str(workdir),
            "HUGGINGGPT_LLM_BASE_URL": self.llm.url,
            "HUGGINGGPT_LLM_MODEL": "fake",
            "HUGGINGGPT_LLM_API_KEY": "x",
            "HUGGINGGPT_INFERENCE": "remote",
            "HUGGINGGPT_CATALOG": str(self.catalog),
            "HUGGINGGPT_TOP_K": "2",
            "HUGGINGGPT_MCP_SERVER": "0",
            "HUGGINGGPT_RESUME_ON_START": "1" if resume_on_start else "0",
        }
        log = open(workdir.parent / f"app-{port}.log", "wb")  # noqa: SIM115 (the process holds it)
        started = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "app.py")], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT
        )
        log.close()
        app = App(process, port, started)
        self.apps.append(app)
        deadline = started + START_SECONDS
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the app ended at its start: see {log.name}")
            try:
                with urllib.request.urlopen(app.url + "config", timeout=2) as reply:
                    if reply.status == 200:
                        app.ready = time.monotonic() - started
                        return app
            except OSError:
                pass
            if time.monotonic() > deadline:
                app.kill()
                raise RuntimeError(f"the app did not start in {START_SECONDS} s")
            time.sleep(0.1)

    def kill_at(self, app: App, point: Point, mark: int) -> bool:
        """SIGKILL at `point` (a trigger of the LLM or the expert server after `mark`)."""
        self._wait_for(point, app.process, Path("/nonexistent"), mark)
        return app.kill()

    def crash_app_and_continue(self, point: Point, context: Any, folder: Path) -> AppOutcome:
        """A request typed into a page, the app killed at `point`, the app started again: counted
        at the expert server and the LLM, timed to the answer in the conversation's record."""
        self.script()
        app = self.start_app(folder)
        mark = len(self.experts.log)
        page = ask(context, app.url)
        try:
            killed = self.kill_at(app, point, mark)
        finally:
            page.close()
        before = state_of(folder)
        llm_mark, expert_mark = len(self.llm.requests), len(self.experts.log)
        restarted = self.start_app(folder, port=app.port)
        try:
            answered = wait_answered(folder)
            seconds = time.monotonic() - restarted.started
        finally:
            restarted.kill()
        return AppOutcome(
            point=point,
            killed=killed,
            **self.counted(before, llm_mark, expert_mark),
            continued=len(journal_files(folder)) == 2,
            answered=answered,
            records_read=records_read(folder),
            restart_to_answer=seconds,
            app_start=restarted.ready,
        )


def ask(context: Any, url: str) -> Any:
    """A page of the app with REQUEST sent; returns once its run shows (Stop)."""
    page = context.new_page()
    page.goto(url)
    page.locator("#status").get_by_text("LLM:").wait_for()
    page.locator("#request textarea").fill(REQUEST)
    page.locator("#request textarea").press("Enter")
    page.locator("#stop").wait_for()
    return page


def journal_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("traces/*.journal.jsonl"))


def state_of(folder: Path) -> JournalState | None:
    found = journal_files(folder)
    return read_journal(found[-1]) if found else None


def record_of(folder: Path) -> dict[str, Any] | None:
    """The conversation's saved record (the store keeps <folder id>.json beside its folder)."""
    found = journal_files(folder)
    if not found:
        return None
    conv = found[0].parent.parent
    try:
        return json.loads((conv.parent / f"{conv.name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def wait_answered(folder: Path, seconds: float = 120.0) -> bool:
    """Until the conversation's record is saved with the run ended and its answer last."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        record = record_of(folder)
        last = str((record or {}).get("display", [{}])[-1].get("content"))
        if record is not None and record.get("running") is False and ANSWER[:40] in last:
            return True
        time.sleep(0.05)
    return False


def records_read(folder: Path) -> bool:
    """Every journal, trace and conversation record under the work folder reads."""
    try:
        for path in journal_files(folder):
            read_journal(path)
        for path in [*folder.rglob("traces/*.json"), *folder.glob("*.json")]:
            json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return True
