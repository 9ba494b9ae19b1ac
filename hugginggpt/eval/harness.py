"""Run the planning stage over TaskBench requests, one JSON line per request as it comes.

A rerun with the same output folder skips the ids already predicted, so an interrupted run
resumes where it stopped. Requests that fail at the LLM backend (unreachable, HTTP errors) are
not written, so the next run asks them again; a plan the LLM could not get right after its
retries is written, with its error, and scores as an empty plan.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hugginggpt import tasks as task_types
from hugginggpt.eval.convert import plan_to_taskbench, taskbench_links
from hugginggpt.eval.data import GoldSample
from hugginggpt.eval.mapping import to_taskbench
from hugginggpt.eval.metrics import RunStats
from hugginggpt.files.artifacts import kind_of_file
from hugginggpt.llms.interface import LLM, LLMError
from hugginggpt.stages.plan import PlanParseError, parse_plan
from hugginggpt.stages.planner import FileInfo, make_plan

PREDICTIONS = "predictions.jsonl"
RUN_INFO = "run.json"
# Media file names a request mentions ("example.jpg"): offered to the planner as the user's files.
_MENTIONED = re.compile(
    r"[\w\-./]*\w\.(?:jpe?g|png|gif|bmp|webp|tiff?|wav|flac|mp3|ogg|m4a|mp4|webm|mov|avi)\b", re.IGNORECASE
)


class RunMismatch(RuntimeError):
    """The output folder holds predictions from a different model, data or number of demos."""


@dataclass
class RunSettings:
    out: Path
    model: str
    base_url: str | None = None
    shots: int | None = None
    max_retries: int = 2
    workers: int = 1
    offer_files: bool = True  # list the media files a request mentions as its uploads
    gold: Path | None = None  # the gold file read (a data folder may hold several, ids shared)

    def identity(self, data: Path) -> dict[str, Any]:
        """What must match for a rerun to resume into the same folder. Never the key."""
        return {
            "data": str(Path(data).resolve()),
            "gold": str(Path(self.gold).resolve()) if self.gold else None,
            "model": self.model,
            "base_url": self.base_url,
            "shots": self.shots,
            "max_retries": self.max_retries,
            "offer_files": self.offer_files,
        }


@dataclass
class RunSummary:
    asked: int = 0  # requests sent this run
    skipped: int = 0  # already in the predictions file
    backend_failures: list[str] = field(default_factory=list)  # "id: message", not written
    aborted: str | None = None


def mentioned_files(request: str) -> list[FileInfo]:
    names = dict.fromkeys(m.group(0).strip("./") for m in _MENTIONED.finditer(request))
    return [FileInfo(kind=kind_of_file(name) or "image", name=name, new=True) for name in names]


def read_predictions(path: Path) -> dict[str, dict[str, Any]]:
    """Records by id. A last line cut short by a kill is dropped (and the file trimmed)."""
    if not path.is_file():
        return {}
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
        path.write_bytes(data)
    records = {}
    for line in data.decode("utf-8").splitlines():
        if line.strip():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            records[str(record["id"])] = record
    return records


def predict_one(llm: LLM, sample: GoldSample, settings: RunSettings) -> dict[str, Any]:
    """Plan one request; the record that goes to the predictions file. Raises LLMError."""
    files = mentioned_files(sample.request) if settings.offer_files else []
    llm.calls.clear()  # the LLM keeps every call; one request's worth is enough here
    started = time.perf_counter()
    outcome = make_plan(
        llm, sample.request, files=files, shots=settings.shots, max_retries=settings.max_retries
    )
    seconds = time.perf_counter() - started
    names = _attempted_names(outcome.replies)
    record: dict[str, Any] = {
        "id": sample.id,
        "request": sample.request,
        "files": [f.name for f in files],
        "plan": outcome.plan.to_json() if outcome.plan is not None else None,
        "error": outcome.error,
        "attempts": outcome.attempts,
        "problems": outcome.problems,
        "replies": outcome.replies,
        "usage": {
            "prompt_tokens": outcome.usage.prompt_tokens,
            "completion_tokens": outcome.usage.completion_tokens,
        },
        "seconds": round(seconds, 3),
        "task_names": names,
        "hallucinated": [n for n in names if task_types.get(n) is None],
    }
    if outcome.plan is not None:
        nodes = plan_to_taskbench(outcome.plan)
        # The shape upstream's prediction files have, so TaskBench's own evaluate.py can read ours.
        record["result"] = {"task_steps": [], "task_nodes": nodes, "task_links": taskbench_links(nodes)}
    return record


def _attempted_names(replies: list[str]) -> list[str]:
    names = []
    for reply in replies:
        try:
            names += [t.task for t in parse_plan(reply).tasks]
        except PlanParseError:
            pass
    return names


def run_stats(record: dict[str, Any] | None) -> RunStats:
    if record is None:
        return RunStats()
    plan = record.get("plan") or []
    usage = record.get("usage") or {}
    return RunStats(
        recorded=True,
        invalid=record.get("plan") is None,
        attempts=int(record.get("attempts", 0)),
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        seconds=float(record.get("seconds", 0.0)),
        names=len(record.get("task_names", [])),
        hallucinated=len(record.get("hallucinated", [])),
        planned=len(plan),
        outside_taskbench=sum(1 for t in plan if to_taskbench(t["task"], t.get("args")) is None),
    )


def predicted_nodes(record: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The TaskBench nodes of a record; None when it has no valid plan (scored as empty)."""
    if record is None or "result" not in record:
        return None
    # A file written by another tool may hold anything here: what is not a node counts as nothing.
    result = record["result"]
    nodes = result.get("task_nodes") if isinstance(result, dict) else None
    return [n for n in nodes if isinstance(n, dict)] if isinstance(nodes, list) else []


def run_predictions(
    samples: list[GoldSample],
    settings: RunSettings,
    make_llm: Callable[[], LLM],
    *,
    data: Path,
    progress: bool = True,
    max_backend_failures: int = 3,
) -> RunSummary:
    """Predict every sample not yet in `settings.out/predictions.jsonl`, appending as results come."""
    settings.out.mkdir(parents=True, exist_ok=True)
    _check_identity(settings.out / RUN_INFO, settings.identity(data))
    path = settings.out / PREDICTIONS
    done = read_predictions(path)
    todo = [s for s in samples if s.id not in done]
    summary = RunSummary(skipped=len(samples) - len(todo))
    local = threading.local()

    def work(sample: GoldSample) -> dict[str, Any]:
        if not hasattr(local, "llm"):
            local.llm = make_llm()  # one per thread: an LLM's call log is not shared
        return predict_one(local.llm, sample, settings)

    bar = _progress(total=len(samples), initial=summary.skipped, enabled=progress)
    failures_in_a_row = 0
    pool = ThreadPoolExecutor(max(1, settings.workers))
    futures = {pool.submit(work, s): s for s in todo}
    try:
        with path.open("a", encoding="utf-8") as sink:
            for future in as_completed(futures):
                sample = futures[future]
                summary.asked += 1
                try:
                    record = future.result()
                except Exception as e:  # noqa: BLE001 - one bad request must not end a long run
                    # Not written: the next run asks again. LLMError is the usual case (server down,
                    # HTTP errors); anything else is reported the same way, with its type.
                    message = str(e) if isinstance(e, LLMError) else f"{type(e).__name__}: {e}"
                    summary.backend_failures.append(f"{sample.id}: {message}")
                    failures_in_a_row += 1
                    if failures_in_a_row >= max_backend_failures:
                        summary.aborted = (
                            f"stopped after {failures_in_a_row} failed requests in a row: {message}"
                        )
                        break
                    continue
                failures_in_a_row = 0
                sink.write(_json_line(record))
                sink.flush()
                bar.update(1)
    except KeyboardInterrupt:
        summary.aborted = "interrupted; run the same command again to resume"
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        bar.close()
    return summary


def _json_line(record: dict[str, Any]) -> str:
    """One JSON line that UTF-8 can hold. An LLM reply may carry a lone surrogate (half an emoji,
    sent as a JSON escape), which UTF-8 refuses: that record is written with ASCII escapes."""
    line = json.dumps(record, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(record)
    return line + "\n"


def _check_identity(path: Path, identity: dict[str, Any]) -> None:
    if path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        # A key the folder's run.json lacks (written by an older version) is not held against it.
        differs = {k: (saved.get(k), v) for k, v in identity.items() if saved.get(k, v) != v}
        if differs:
            what = ", ".join(f"{k}: {old!r} there, {new!r} now" for k, (old, new) in differs.items())
            raise RunMismatch(f"{path.parent} holds another run ({what}); choose another --out")
        return
    path.write_text(json.dumps(identity, indent=2) + "\n", encoding="utf-8")


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(*, total: int, initial: int, enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="req", desc="planning", dynamic_ncols=True)
