"""One call of the runtime as plain data, so it can cross a process or a machine (a Ray replica).

A Job carries its media as bytes and a Reply carries the files the model made as bytes: a runner
needs no file system shared with the server that took the request. `execute` is the one place where
a Job meets models_local.Runtime and where the runtime's errors become HTTP statuses.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models_local import telemetry
from models_local.handlers.base import RuntimeUnsupported, Stopped

# Status codes a failed call answers with. 404 tells a client (the controller's hosted endpoint)
# that this server cannot serve the model at all, so it tries another backend.
BAD_REQUEST, UNSERVABLE, CLIENT_GONE, FAILED, UNAVAILABLE = 400, 404, 499, 500, 503
# What Pillow and soundfile raise for bytes that are no image or audio they know: the client's fault.
_UNREADABLE = ("UnidentifiedImageError", "LibsndfileError")
# A job's files (its media in, what the model made out) live for one call: in memory where the
# machine has room for them. On a virtual disk, creating, writing and removing the folder cost
# 4 to 6 ms per call, more than a warm tiny model's own run (bench/serve_throughput.py).
MEMORY_FOLDER = Path("/dev/shm")
MEMORY_ROOM = 2**30  # /dev/shm is only used when this much is free (a container's may be 64 MB)


@dataclass(frozen=True)
class Media:
    data: bytes
    suffix: str  # how the file is named for the loaders: ".png", ".wav", ...


@dataclass(frozen=True)
class Job:
    task: str
    model: str  # the id the client asked for
    source: str  # what the runtime loads: a folder on the runner's machine or a hub id
    inputs: dict[str, str]  # text arguments
    media: dict[str, Media] = field(default_factory=dict)  # file arguments
    seed: int | None = None
    trace: dict[str, str] = field(default_factory=dict)  # the request's span as W3C headers (traceparent)
    queued_ns: int = 0  # when the server took the request (time.time_ns()): the queue wait's start


@dataclass(frozen=True)
class Output:
    kind: str  # text | data | image | audio | video
    value: Any = None  # text and data
    data: bytes | None = None  # the file's bytes, for media kinds
    suffix: str = ""


@dataclass(frozen=True)
class Reply:
    outputs: list[Output] = field(default_factory=list)
    status: int = 200
    error: str = ""
    replica: str = ""  # which runner answered (Ray Serve: the replica's actor name)
    resident: tuple[str, ...] = ()  # the models that runner holds now
    batch_size: int = 0  # how many calls ran together with this one (models_local/batching.py)

    @property
    def ok(self) -> bool:
        return self.status == 200


def failed(status: int, message: str) -> Reply:
    return Reply(status=status, error=message)


def execute(runtime: Any, job: Job, stop: Any = None) -> Reply:
    """Run `job` on a models_local Runtime; never raises: a failure is a Reply with a status.

    In the request's trace: the wait for a worker or replica, then the runtime's load and run."""
    labels = {"hugginggpt.expert.task": job.task, "hugginggpt.expert.model": job.model}
    with telemetry.joined(job.trace), telemetry.labelled(labels):
        with telemetry.span("queue wait", start_time=job.queued_ns or None):
            pass
        return _execute(runtime, job, stop)


@functools.cache
def job_folder() -> str | None:
    """Where a job's folder goes: /dev/shm when it is there with room to spare, else the usual
    temporary folder (None). Looked up once per process."""
    try:
        roomy = os.access(MEMORY_FOLDER, os.W_OK) and shutil.disk_usage(MEMORY_FOLDER).free >= MEMORY_ROOM
    except OSError:
        return None
    return str(MEMORY_FOLDER) if roomy else None


def _execute(runtime: Any, job: Job, stop: Any) -> Reply:
    with tempfile.TemporaryDirectory(prefix="serve-", dir=job_folder()) as tmp:
        folder = Path(tmp)
        inputs = dict(job.inputs)
        for name, media in job.media.items():
            path = folder / f"in-{name}{media.suffix}"
            path.write_bytes(media.data)
            inputs[name] = str(path)
        sizes: list[int] = []
        try:
            artifacts = runtime.run(
                job.task, job.source, inputs, folder / "out", stop=stop, seed=job.seed, batched=sizes.append
            )
        except Stopped:
            return failed(CLIENT_GONE, f"{job.model}: stopped, the client went away")
        except RuntimeUnsupported as exc:
            return failed(UNSERVABLE, f"{job.model} cannot run {job.task} here: {exc}")
        except (KeyError, ValueError) as exc:  # a missing argument, an input the model refuses
            return failed(BAD_REQUEST, f"{job.model} ({job.task}): bad input: {type(exc).__name__}: {exc}")
        except Exception as exc:
            if type(exc).__name__ not in _UNREADABLE:
                traceback.print_exc()  # the model crashed: the client hears why, the log sees where
                return failed(FAILED, f"{job.model} failed on {job.task}: {type(exc).__name__}: {exc}")
            return failed(BAD_REQUEST, f"{job.model} ({job.task}): the file sent could not be read: {exc}")
        outputs = []
        for item in artifacts:
            if "path" in item:
                path = Path(item["path"])
                outputs.append(Output(item["kind"], data=path.read_bytes(), suffix=path.suffix))
            else:
                outputs.append(Output(item["kind"], value=item["value"]))
        return Reply(outputs, batch_size=sizes[0] if sizes else 0)
