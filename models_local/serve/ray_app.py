"""The expert server on Ray Serve: an ingress that speaks the HF inference protocol, and runners.

    serve run serve_config.yaml          (README.md: "Serving the experts on Ray Serve")

The ingress deployment is app.py's ASGI app with a backend that runs each job in a runner. Runners
are grouped by task (`groups` in the config's args): a group is its own deployment, so diffusion and
large generators can have GPU fractions, replica counts and autoscaling of their own, while one group
(`in_ingress`: the small CPU-friendly models by default) runs inside the ingress's own replicas.
Its calls then take one Serve hop (proxy to ingress) instead of two (proxy to ingress to runner):
each Serve hop costs several milliseconds, more than a warm small model's own run. Within a
deployed group, requests carry the model id as Serve's multiplexed model id: Serve routes a model's
requests to replicas that already hold it. Each runner keeps at most `max_models_per_replica`
models resident, least recently used out (the runtime's memory budget still applies on top).

A client that disconnects cancels the ingress request; Serve cancels the runner call with it, and
the runner sets the runtime's stop signal. A runner replica that dies mid-call is replaced by Serve;
the ingress retries the call once on another replica, then answers 503 (which the controller's
hosted endpoint retries as well).
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle

from models_local.serve.app import create_app
from models_local.serve.jobs import FAILED, UNAVAILABLE, UNSERVABLE, Job, Reply, execute
from models_local.serve.settings import ServerSettings

# Diffusion pipelines and text generators: the families that want a GPU.
HEAVY_TASKS = (
    "text-to-image",
    "image-to-image",
    "text-to-video",
    "*-text-to-image",
    "text-generation",
    "conversational",
)
log = logging.getLogger("ray.serve")
MAX_ONGOING = 8  # calls a runner replica takes at once (and so the largest batch it can make)
DEFAULT_GROUPS: dict[str, dict[str, Any]] = {
    "heavy": {"tasks": list(HEAVY_TASKS), "max_models_per_replica": 1},
    # no tasks: every task no other group takes; in the ingress's replicas, one Serve hop per call
    "light": {"max_models_per_replica": 4, "in_ingress": True},
}


@dataclass(frozen=True)
class Group:
    name: str
    tasks: tuple[str, ...]  # fnmatch patterns; empty: the group for every other task
    max_models_per_replica: int
    in_ingress: bool = False  # run in the ingress's replicas, not a deployment of its own


def parse_groups(raw: dict[str, Any] | None) -> list[Group]:
    groups = []
    for name, spec in (raw or DEFAULT_GROUPS).items():
        spec = spec or {}
        unknown = set(spec) - {"tasks", "max_models_per_replica", "in_ingress"}
        if unknown:
            raise ValueError(f"group {name}: unknown keys {', '.join(sorted(unknown))}")
        most = spec.get("max_models_per_replica", 3)
        if not isinstance(most, int) or most < 1:
            raise ValueError(f"group {name}: max_models_per_replica must be a whole number of at least 1")
        in_ingress = spec.get("in_ingress", False)
        if not isinstance(in_ingress, bool):
            raise ValueError(f"group {name}: in_ingress must be true or false")
        groups.append(Group(name, tuple(spec.get("tasks") or ()), most, in_ingress))
    if sum(1 for g in groups if not g.tasks) > 1:
        raise ValueError("at most one group may leave out `tasks` (it takes every other task)")
    if sum(1 for g in groups if g.in_ingress) > 1:
        raise ValueError("at most one group may run in_ingress (the ingress holds one runner)")
    return groups


def group_for(groups: list[Group], task: str) -> str | None:
    named = next((g.name for g in groups if any(fnmatch.fnmatchcase(task, p) for p in g.tasks)), None)
    return named or next((g.name for g in groups if not g.tasks), None)


# ---- runners --------------------------------------------------------------------------------------


class _Resident:
    """What Serve's multiplexer holds per model. The model itself lives in the runtime's cache
    (loaded on first call); when the multiplexer lets the model go, the runtime unloads it."""

    def __init__(self, runtime: Any, source: str) -> None:
        self.runtime, self.source = runtime, source
        # An instance attribute, not a method: the multiplexer calls it on eviction, while the
        # garbage collector (which looks on the class) does not, so a later copy is never dropped.
        self.__del__ = self.unload

    def unload(self) -> None:
        self.runtime.drop(self.source)


class Runner:
    """One runner: a models_local Runtime, sized to the share of the GPU its replica was given. A
    runner deployment's replica is one; an ingress replica holds one for its `in_ingress` group."""

    def __init__(self, settings: dict[str, Any]) -> None:
        import ray

        runtime_log = logging.getLogger("models_local")  # loads, evictions, refusals: into the replica's log
        runtime_log.setLevel(logging.INFO)
        for handler in log.handlers:
            runtime_log.addHandler(handler)
        gpus = ray.get_runtime_context().get_assigned_resources().get("GPU", 0.0)
        self.runtime = ServerSettings.from_mapping(settings).runtime(share=gpus if 0 < gpus < 1 else 1.0)
        self.replica = serve.get_replica_context().replica_id.to_full_id_str()
        self._sources: dict[str, str] = {}
        # One thread per call the replica takes at once: concurrent calls of a model meet in the
        # runtime's batcher (models_local/batching.py), which runs them as one batch.
        self._pool = ThreadPoolExecutor(MAX_ONGOING, thread_name_prefix="runner")

    async def resident_model(self, model_id: str) -> _Resident:  # replaced per group, multiplexed
        return _Resident(self.runtime, self._sources[model_id])

    async def run(self, job: Job, stop: threading.Event | None = None) -> Reply:
        self._sources[job.model] = job.source
        await self.resident_model(job.model)  # the multiplexed id a runner deployment was called with
        stop = stop or threading.Event()
        future = asyncio.get_running_loop().run_in_executor(self._pool, execute, self.runtime, job, stop)
        try:
            reply = await future
        except asyncio.CancelledError:  # the client went: the call ends at its next step
            stop.set()
            raise
        return replace(reply, replica=self.replica, resident=tuple(self.runtime.cached()))


def runner_class(group: Group) -> type[Runner]:
    """Runner keeping at most the group's number of models (Serve's multiplexer drops the least
    recently used one)."""

    class GroupRunner(Runner):
        @serve.multiplexed(max_num_models_per_replica=group.max_models_per_replica)
        async def resident_model(self, model_id: str) -> _Resident:
            return _Resident(self.runtime, self._sources[model_id])

    return GroupRunner


def runner_deployment(group: Group) -> Any:
    return serve.deployment(
        runner_class(group),
        name=group.name,
        max_ongoing_requests=MAX_ONGOING,
        ray_actor_options={"num_cpus": 1},
    )


# ---- ingress --------------------------------------------------------------------------------------


class RayBackend:
    """Jobs go to the runner group of their task: the ingress's own runner (`local`) for its group,
    else the group's deployment, as multiplexed requests for their model."""

    name = "ray-serve"

    def __init__(
        self, runners: dict[str, DeploymentHandle], groups: list[Group], local: Runner | None = None
    ) -> None:
        self.runners, self.groups, self.local = runners, groups, local
        self._reports: dict[str, tuple[str, tuple[str, ...], float]] = {}  # replica -> group, models, when

    async def run(self, job: Job, stop: threading.Event) -> Reply:
        group = group_for(self.groups, job.task)
        if group is None:
            return Reply(status=UNSERVABLE, error=f"no runner group takes task {job.task!r}")
        if group in self.runners:
            reply = await self._remote(group, job)
        else:  # the ingress's own group: in this replica, no second hop
            assert self.local is not None
            reply = await self.local.run(job, stop)
        if reply.replica:
            self._reports[reply.replica] = (group, reply.resident, time.monotonic())
        return reply

    async def _remote(self, group: str, job: Job) -> Reply:
        from ray.exceptions import RayActorError, RayTaskError
        from ray.serve.exceptions import BackPressureError, ReplicaUnavailableError

        handle = self.runners[group].options(multiplexed_model_id=job.model)
        for attempt in (1, 2):
            try:
                reply: Reply = await handle.run.remote(job)
            except (RayActorError, ReplicaUnavailableError) as exc:  # the replica died mid-call
                if attempt == 1:
                    # Serve routes the retry to a live replica (and replaces the dead one)
                    log.warning("a %s replica died running %s (%s); retrying once", group, job.model, exc)
                    continue
                return Reply(
                    status=UNAVAILABLE,
                    error=f"{job.model}: the {group} replica running it was lost twice "
                    f"({type(exc).__name__}); try again shortly",
                )
            except BackPressureError:
                return Reply(status=UNAVAILABLE, error=f"the {group} runners are busy; try again shortly")
            except RayTaskError as exc:  # a bug in the runner itself
                return Reply(status=FAILED, error=f"{job.model}: the runner failed: {exc.cause!r}")
            return reply
        raise AssertionError("unreachable")

    def resident(self) -> list[dict[str, Any]]:
        """As each replica last reported it (with its answer to a call)."""
        now = time.monotonic()
        return [
            {"id": model, "replica": replica, "group": group, "reported_s_ago": round(now - when, 1)}
            for replica, (group, models, when) in self._reports.items()
            for model in models
        ]


@serve.deployment(name="ingress", max_ongoing_requests=64, ray_actor_options={"num_cpus": 0.25})
@serve.ingress()
class Ingress:
    def __init__(self, runners: dict[str, DeploymentHandle], groups: dict[str, Any], settings: dict) -> None:
        self.settings = ServerSettings.from_mapping(settings)
        parsed = parse_groups(groups)
        own = next((g for g in parsed if g.in_ingress), None)
        local = runner_class(own)(settings) if own else None
        self.backend = RayBackend(runners, parsed, local)

    def __serve_build_asgi_app__(self) -> Any:
        return create_app(
            self.backend, self.settings.table(), seed=self.settings.seed, limits=self.settings.limits()
        )


def build(args: dict[str, Any]) -> Any:
    """The application for `serve run` / a Serve config's import_path. `args`: ServerSettings
    fields (models_dir, hub, seed, memory_gb, device, diffusion_steps) and `groups`."""
    args = dict(args or {})
    raw_groups = args.pop("groups", None) or DEFAULT_GROUPS
    groups = parse_groups(raw_groups)
    ServerSettings.from_mapping(args)  # a bad setting fails the deploy, not the first request
    runners = {g.name: runner_deployment(g).bind(args) for g in groups if not g.in_ingress}
    # mypy keeps a decorated class's type: it does not see that serve.deployment made Ingress a Deployment
    return Ingress.bind(runners, raw_groups, args)  # type: ignore[attr-defined]
