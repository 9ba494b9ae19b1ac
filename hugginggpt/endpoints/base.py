"""The endpoint interface: run one task with one model on concrete inputs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..artifacts import Artifact
from ..catalog import ModelCard


class EndpointError(RuntimeError):
    """A model failed to run a task; the executor may try the next candidate."""


class ModelUnavailable(EndpointError):
    """This endpoint cannot serve this model at all (unsupported, too large, not found)."""


class Stopped(EndpointError):
    """The call ended early because its stop signal was set: nobody wants the result any more."""


class StopSignal(Protocol):
    """Set when the caller no longer wants the result (Stop pressed, time-out): a threading.Event."""

    def is_set(self) -> bool: ...


# Where the task being run wants to hear how its model's download and load go: (phase "download" or
# "load", bytes so far, bytes in all). The executor sets it around each call, so that every wrapper
# (cache, router, telemetry) passes it on untouched; an endpoint that downloads or loads (local) calls it.
ProgressReport = Callable[[str, int, int], None]
progress_report: ContextVar[ProgressReport | None] = ContextVar("progress_report", default=None)


@dataclass(frozen=True)
class Footprint:
    """What running a model takes before it runs (estimate.py adds the seconds); None: not known."""

    where: str  # "local:cpu", "local:cuda", "hosted", "remote": also what learnt seconds are kept by
    download_bytes: int | None = 0
    memory_bytes: int | None = 0  # on this machine
    size_bytes: int | None = None  # the model's weight files
    cost_usd: float | None = None  # of one call, where the provider's price is known
    loaded: bool = False  # already in memory here: a call skips the load (learnt apart from first calls)


class Endpoint(ABC):
    name: str = "endpoint"

    @abstractmethod
    def can_run(self, model: ModelCard) -> bool:
        """Cheap check, no loading: may this endpoint be offered `model`?"""

    @abstractmethod
    def run(
        self,
        task: str,
        model: ModelCard,
        inputs: dict[str, Any],
        out_dir: Path,
        *,
        stop: StopSignal | None = None,
    ) -> list[Artifact]:
        """Run `task` with `model`.

        `inputs` maps the task's argument names to values: a str for text arguments, an absolute
        Path inside the workspace for image/audio/video arguments. Files the task makes go under
        `out_dir`. Returns at least one artifact of each kind the task spec lists in `outputs`.
        Raises EndpointError (or ModelUnavailable) on failure. Once `stop` is set the call may end
        early with Stopped; endpoints that cannot interrupt their work ignore it.
        """

    def warm(self, task: str, model: ModelCard) -> bool:
        """Get `model` ready for `task` ahead of its call (download, load within the memory budget),
        for a task that waits for its inputs. True if something was done; errors are the call's to
        report, so a failed warm-up just returns False. Endpoints with nothing to warm do nothing."""
        return False

    def describe(self) -> str:
        return self.name

    def footprint(self, model: ModelCard) -> Footprint:
        """What running `model` here takes: by default it runs elsewhere, so nothing on this machine."""
        return Footprint(self.name, size_bytes=model.size_bytes)


class WrappedEndpoint(Endpoint):
    """An endpoint around another (the result cache, the observer, ZeroGPU): everything but `run` is
    the inner one's, so a hook added to Endpoint reaches every wrapper without editing each."""

    def __init__(self, inner: Endpoint) -> None:
        self.inner = inner
        self.name = inner.name

    def can_run(self, model: ModelCard) -> bool:
        return self.inner.can_run(model)

    def warm(self, task: str, model: ModelCard) -> bool:
        return self.inner.warm(task, model)

    def describe(self) -> str:
        return self.inner.describe()

    def footprint(self, model: ModelCard) -> Footprint:
        return self.inner.footprint(model)
