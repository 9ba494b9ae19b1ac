"""The endpoint interface: run one task with one model on concrete inputs."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hugginggpt.catalog import ModelCard
from hugginggpt.files.artifacts import Artifact


class EndpointError(RuntimeError):
    """A model failed to run a task; the executor may try the next candidate."""


class ModelUnavailable(EndpointError):
    """This endpoint cannot serve this model at all (unsupported, too large, not found)."""


class Stopped(EndpointError):
    """The call ended early because its stop signal was set: nobody wants the result any more."""


class StopSignal(Protocol):
    """Set when the caller no longer wants the result (Stop pressed, time-out): a threading.Event."""

    def is_set(self) -> bool: ...


# How a model's download and load go: (phase "download" or "load", bytes so far, bytes in all).
ProgressReport = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Credentials:
    """Who a call is made for: a signed-in visitor's HF token (hosted calls then go on their bill,
    else the server's token pays) and a ZeroGPU visitor's `x-ip-token` (forwarded to Spaces, so the
    visitor's GPU quota is spent). Never logged: the repr hides them."""

    hf_token: str | None = field(default=None, repr=False)
    ip_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True, kw_only=True)
class Call:
    """What one call needs besides its task, model and inputs, passed whole through every wrapper
    (cache, router, observer, ZeroGPU): where its files go, when to stop, by when it must end,
    whom it is made for, whom to tell how the model's download and load go (an endpoint that
    downloads or loads calls it), whose cached results it may be served (None: it is not cached)."""

    out_dir: Path
    stop: StopSignal | None = None
    progress: ProgressReport | None = None
    deadline: float | None = None  # time.monotonic() by which the task must be over; None: no limit
    credentials: Credentials = Credentials()
    cache_scope: str | None = None  # the result cache's scope (run/cache.py: run_scope)

    def seconds_left(self, limit: float) -> float:
        """The time an endpoint may wait for an answer: its own `limit`, cut to the call's deadline
        (at least a moment, so that a late call still fails with a time-out, not a bad argument)."""
        if self.deadline is None:
            return limit
        return max(0.1, min(limit, self.deadline - time.monotonic()))


@dataclass(frozen=True, kw_only=True)
class Result:
    """What a call made, and which backend answered: an endpoint's name ("local", "hosted",
    "remote", ...), or "cache" when the result cache served it and no model ran."""

    outputs: list[Artifact]
    answered_by: str

    @property
    def cached(self) -> bool:
        return self.answered_by == CACHE


CACHE = "cache"


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
    def run(self, task: str, model: ModelCard, inputs: dict[str, Any], call: Call) -> Result:
        """Run `task` with `model`.

        `inputs` maps the task's argument names to values: a str for text arguments, an absolute
        Path inside the workspace for image/audio/video arguments. Files the task makes go under
        `call.out_dir`. The result holds at least one artifact of each kind the task spec lists in
        `outputs`, and the name of the backend that answered. Raises EndpointError (or
        ModelUnavailable) on failure. Once `call.stop` is set the call may end early with Stopped;
        endpoints that cannot interrupt their work ignore it.
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
