"""What happened to each task of a run: the record the answer, the trace, the CLI and the UI read."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from hugginggpt.files.artifacts import Artifact, ArtifactKind
from hugginggpt.files.hashing import artifact_sha256


class TaskStatus(StrEnum):
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"  # every model tried failed, or the inputs were refused
    SKIPPED = "skipped"  # a task it needs did not finish
    STOPPED = "stopped"  # the run was stopped (Stop pressed, page left) before the task finished


@dataclass
class TaskRecord:
    """One task's result. Written by the executor's worker for that task only, read after it ends."""

    id: int
    task: str
    args: dict[str, str]
    model: str | None = None
    status: TaskStatus = TaskStatus.PENDING
    error: str | None = None
    outputs: list[Artifact] = field(default_factory=list)
    seconds: float = 0.0
    attempts: list[dict[str, Any]] = field(default_factory=list)
    cached: bool = False  # served from the result cache: no model ran
    seed: int | None = None  # the seed the model was given (tasks that sample)
    resumed: bool = False  # finished before the run crashed: taken from its journal (resume.py)

    def output(self, kind: ArtifactKind | str) -> Artifact | None:
        return next((a for a in self.outputs if a.kind == kind), None)

    def to_json(self, root: Path | None = None) -> dict[str, Any]:
        """For the trace: file paths relative to `root` (the workspace)."""
        return {
            "id": self.id,
            "task": self.task,
            "args": self.args,
            "model": self.model,
            "status": str(self.status),
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "attempts": self.attempts,
            "cached": self.cached,
            "seed": self.seed,
            "resumed": self.resumed,
            # content hashes: replay compares a new run's outputs with these
            "outputs": [{**a.to_json(root), "sha256": artifact_sha256(a)} for a in self.outputs],
        }
