"""The expert server on Ray Serve: an ingress that speaks the HF inference protocol, and runners.

    serve run serve_config.yaml          (README.md: "Serving the experts on Ray Serve")

The ingress deployment is app.py's ASGI app with a backend that sends each job to a runner
deployment. Runners are grouped by task (`groups` in the config's args): each group is its own
deployment, so diffusion and large generators can have GPU fractions, replica counts and
autoscaling of their own while the small CPU-friendly models share cheaper replicas. Within a group,
requests carry the model id as Serve's multiplexed model id: Serve routes a model's requests to
replicas that already hold it, and each replica keeps at most `max_models_per_replica` models
resident, least recently used out (the runtime's memory budget still applies on top).

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
    "light": {"max_models_per_replica": 4},  # no tasks: every task no other group takes
}


@dataclass(frozen=True)
class Group:
    name: str
    tasks: tuple[str, ...]  # fnmatch patterns; empty: the group for every other task
    max_models_per_replica: int


def parse_groups(raw: dict[str, Any] | None) -> list[Group]:
    groups = []
    for name, spec in (raw or DEFAULT_GROUPS).items():
        spec = spec or {}
        unknown = set(spec) - {"tasks", "max_models_per_replica"}
        if unknown:
            raise ValueError(f"group {name}: unknown keys {', '.join(sorted(unknown))}")
        most = spec.get("max_models_per_replica", 3)
        if not isinstance(most, int) or most < 1:
            raise ValueError(f"group {name}: max_models_per_replica must be a whole number of at least 1")
        groups.append(Group(name, tuple(spec.get("tasks") or ()), most))
    if sum(1 for g in groups if not g.tasks) > 1:
        raise ValueError("at most one group may leave out `tasks` (it takes every other task)")
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
    """One runner replica: a models_local Runtime, sized to the share of the GPU it was given."""

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

    async def run(self, job: Job) -> Reply:
        self._sources[job.model] = job.source
        await self.resident_model(serve.get_multiplexed_model_id() or job.model)
        stop = threading.Event()
        future = asyncio.get_running_loop().run_in_executor(self._pool, execute, self.runtime, job, stop)
        try:
            reply = await future
        except asyncio.CancelledError:  # the client went: the call ends at its next step
            stop.set()
            raise
        return replace(reply, replica=self.replica, resident=tuple(self.runtime.cached()))


def runner_deployment(group: Group) -> Any:
    """A deployment of Runner whose replicas keep at most the group's number of models."""

    class GroupRunner(Runner):
        @serve.multiplexed(max_num_models_per_replica=group.max_models_per_replica)
        async def resident_model(self, model_id: str) -> _Resident:
            return _Resident(self.runtime, self._sources[model_id])

    return serve.deployment(
        GroupRunner, name=group.name, max_ongoing_requests=MAX_ONGOING, ray_actor_options={"num_cpus": 1}
    )


# ---- ingress --------------------------------------------------------------------------------------


class RayBackend:
    """Jobs go to the runner group of their task, as multiplexed requests for their model."""

    name = "ray-serve"

    def __init__(self, runners: dict[str, DeploymentHandle], groups: list[Group]) -> None:
        self.runners, self.groups = runners, groups
        self._reports: dict[str, tuple[str, tuple[str, ...], float]] = {}  # replica -> group, models, when

    async def run(self, job: Job, stop: threading.Event) -> Reply:
        from ray.exceptions import RayActorError, RayTaskError
        from ray.serve.exceptions import BackPressureError, ReplicaUnavailableError

        group = group_for(self.groups, job.task)
        if group is None:
            return Reply(status=UNSERVABLE, error=f"no runner group takes task {job.task!r}")
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
            self._reports[reply.replica] = (group, reply.resident, time.monotonic())
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
        self.backend = RayBackend(runners, parse_groups(groups))

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
    runners = {g.name: runner_deployment(g).bind(args) for g in groups}
    # mypy keeps a decorated class's type: it does not see that serve.deployment made Ingress a Deployment
    return Ingress.bind(runners, raw_groups, args)  # type: ignore[attr-defined]
