"""The answer path's depth, read from a real run: a chat request through the fake LLM server, and at
its first task a look at every thread's stack (tests/test_answer_path.py, and printed by
`python tests/answer_path_probe.py`). The answer path runs from the chat's submit (ChatApp.respond,
which follows the run) to the task graph's scheduler (TaskGraph.run). Its threads are the submit's
and those of the web layer's that the run's events pass through (any with a webui/ frame, the
thread driving the scheduler among them); its generator frames are the project's own (hugginggpt/,
webui/) on those threads; a thread hand-off is each thread of the path past the first. Not on the
path: the core's own threads (the plan's stream, a task's, the model call's), the watchers that only
wait for a stop, and any thread that was there before the request."""

from __future__ import annotations

import inspect
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from app_support import app_settings, fake_catalog, photo, responder  # noqa: E402
from fakes.endpoints import FakeEndpoint  # noqa: E402
from fakes.llm_server import FakeLLMServer  # noqa: E402

from webui.chat.engine import ChatApp, LLMChoice  # noqa: E402

OURS = (str(ROOT / "hugginggpt"), str(ROOT / "webui"))
WATCHERS = {"run_entry._give_back_when_given_up", "live_runs.end_after_grace"}  # wait for a stop only


@dataclass(frozen=True)
class Thread:
    name: str
    generators: tuple[str, ...]  # the project's generator frames, outermost first
    frames: tuple[str, ...]  # the project's frames of any kind
    web: bool  # whether any of them is the web layer's


def project_frames(frame: Any) -> list[Any]:
    stack = []
    while frame is not None:
        if frame.f_code.co_filename.startswith(OURS):
            stack.append(frame)
        frame = frame.f_back
    return stack[::-1]


class Probe(FakeEndpoint):
    """Takes a picture of every thread's stack when the run's first task runs."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Thread] = []
        # By the thread objects, not their ids: a thread that ends meanwhile leaves its id to a new one.
        self.before = set(threading.enumerate()) - {threading.current_thread()}

    def run(self, task, model, inputs, call):  # type: ignore[no-untyped-def]
        # The task starts on its own thread while the driver may still be handing the scheduler's last
        # event on (the scheduler's generator is then suspended, off the stack): wait, bounded, until the
        # driver is back in the scheduler, as it is for all of a task's run but its first moment.
        deadline = time.monotonic() + 10
        while not self.seen and time.monotonic() < deadline:
            seen = self.look()
            if any("task_graph.run" in t.generators for t in seen):
                self.seen = seen
            time.sleep(0.01)
        return super().run(task, model, inputs, call)

    def look(self) -> list[Thread]:
        seen, stacks = [], sys._current_frames()
        for thread in set(threading.enumerate()) - self.before:
            frames = project_frames(stacks.get(thread.ident))
            gens = tuple(_name(f) for f in frames if f.f_code.co_flags & inspect.CO_GENERATOR)
            if frames:
                web = any(f.f_code.co_filename.startswith(OURS[1]) for f in frames)
                seen.append(Thread(thread.name, gens, tuple(map(_name, frames)), web))
        return seen


def _name(frame: Any) -> str:
    return f"{Path(frame.f_code.co_filename).stem}.{frame.f_code.co_name}"


def measure() -> list[Thread]:
    with FakeLLMServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.responder = responder
        probe = Probe()
        chat = ChatApp(app_settings(server, Path(tmp) / "ws"), catalog=fake_catalog(), endpoint=probe)
        image = str(photo(Path(tmp) / "a.png"))
        key = "b-" + "k" * 24  # a browser's conversation: its run is followed, and goes on without it
        for _ in chat.respond(key, {"text": "caption this", "files": [image]}, LLMChoice()):
            pass
        return probe.seen


def answer_path(seen: list[Thread]) -> list[Thread]:
    """The threads from the submit to the scheduler, the submit's first."""
    path = [t for t in seen if t.web and not set(t.frames) <= WATCHERS]
    return sorted(path, key=lambda t: "engine.respond" not in t.frames)


def main() -> None:
    path = answer_path(measure())
    for t in path:
        print(f"{t.name}: {len(t.generators)} generator frames: {' > '.join(t.frames)}")
    gens = sum(len(t.generators) for t in path)
    print(f"generator frames: {gens}; threads: {len(path)} (hand-offs: {len(path) - 1})")


if __name__ == "__main__":
    main()
