"""The HTTP side of the expert server: an ASGI app (Starlette) speaking the HF inference protocol.

    POST /models/{model_id}                       the task is the one the model's card declares
    POST /models/{model_id}/pipeline/{task}       the task named (the HF Inference API's form)
    POST /models/{model_id}[/pipeline/{task}]/v1/chat/completions   chat (conversational)
    GET  /models                                  what is served, and what is resident where
    GET  /health

The app turns a request into Jobs and hands them to a backend: `LocalBackend` runs them on a
Runtime in this process (`python -m models_local.serve`); the Ray Serve ingress hands them to
runner replicas (ray_app.py). A client that disconnects stops its call: the stop signal reaches
the runtime, which ends a diffusion run between two steps and generation at the next token.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from models_local import telemetry
from models_local.handlers import HANDLERS
from models_local.serve.fair import FairShare
from models_local.serve.jobs import BAD_REQUEST, CLIENT_GONE, FAILED, UNSERVABLE, Job, Reply, execute
from models_local.serve.limits import Limits, MediaRefused
from models_local.serve.metrics import BATCH_HEADER, ServerMetrics
from models_local.serve.models import ModelTable, UnknownModel
from models_local.serve.protocol import BadInput, decode, encode

MAX_BODY_BYTES = 64 * 2**20
_PIPELINE = re.compile(r"(?P<model>.+?)/pipeline/(?P<task>[\w-]+)")
_CHAT_TAILS = ("/v1/chat/completions", "/chat/completions")


class Backend(Protocol):
    name: str

    async def run(self, job: Job, stop: threading.Event) -> Reply:
        """Run one job; a failure is a Reply with an error status, never an exception."""

    def resident(self) -> list[dict[str, Any]]:
        """Models loaded now: [{"id": what the runtime loaded, "replica": where}, ...]."""


class LocalBackend:
    """Jobs on one models_local Runtime in this process, in a thread pool."""

    name = "in-process"

    def __init__(self, runtime: Any, *, workers: int = 8) -> None:
        self.runtime = runtime
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="expert")

    async def run(self, job: Job, stop: threading.Event) -> Reply:
        future = asyncio.get_running_loop().run_in_executor(self._pool, self.call, job, stop)
        try:
            return await future
        except asyncio.CancelledError:  # the request was cancelled: the call stops at its next step
            stop.set()
            raise

    def call(self, job: Job, stop: threading.Event) -> Reply:
        """In a worker thread: the job on the runtime."""
        return execute(self.runtime, job, stop)

    def resident(self) -> list[dict[str, Any]]:
        return [{"id": model, "replica": "in-process"} for model in self.runtime.cached()]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


class TooLarge(Exception):
    pass


async def _body(request: Request, limit: int) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"the body is over the server's limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _disconnected(request: Request) -> None:
    """Returns once the client has gone (uvicorn says so on the request's receive channel)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _run(backend: Backend, job: Job, request: Request) -> Reply:
    """The job, stopped when the client disconnects or the request is cancelled (Ray Serve cancels
    the request's task when its client goes)."""
    stop = threading.Event()
    work = asyncio.ensure_future(backend.run(job, stop))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        stop.set()
        work.cancel()
        raise
    finally:
        gone.cancel()
    if not work.done():
        stop.set()
        work.cancel()
        return Reply(status=CLIENT_GONE, error=f"{job.model}: the client went away")
    return work.result()


def create_app(
    backend: Backend,
    table: ModelTable,
    *,
    seed: int | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    limits: Limits | None = None,
) -> Starlette:
    """`seed`: used for requests that bring none (parameters.seed), so outputs repeat. `limits`: what
    one request may bring (pixels, audio seconds) and how long its body may take to arrive."""
    limits = limits or Limits()

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "backend": backend.name})

    async def models(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "models": table.listing(),
                "hub": table.hub,
                "tasks": sorted(HANDLERS),
                "resident": [{**r, "id": table.id_of(r["id"])} for r in backend.resident()],
                "backend": backend.name,
            }
        )

    measured = ServerMetrics(backend, tasks=[*HANDLERS, "other"])

    async def infer(request: Request) -> Response:
        """One call, in the caller's trace (its traceparent) and counted by task and status."""
        path = request.path_params["path"].rstrip("/")
        named = _PIPELINE.search(path)
        task = named["task"] if named and named["task"] in HANDLERS else "other"  # a bounded label
        model = named["model"] if named else path
        labels = {"hugginggpt.expert.task": task, "hugginggpt.expert.model": model}
        with telemetry.served(request.headers, "POST", "/models/{model}/pipeline/{task}", labels) as answered:
            response = await measured.timed(task, lambda: answer(request))
            answered(response.status_code)
            return response

    async def answer(request: Request) -> Response:
        path, chat = request.path_params["path"].rstrip("/"), False
        for tail in _CHAT_TAILS:
            if path.endswith(tail):
                path, chat = path[: -len(tail)], True
                break
        named = _PIPELINE.fullmatch(path)
        model_id, task = (named["model"], named["task"]) if named else (path, None)
        task = task or table.task_of(model_id) or ("conversational" if chat else None)
        if task is None:
            return error(
                BAD_REQUEST,
                f"{model_id} declares no task: POST /models/{model_id}/pipeline/<task> to name one",
            )
        if task not in HANDLERS:
            return error(
                UNSERVABLE, f"this server has no task {task!r}; it serves {', '.join(sorted(HANDLERS))}"
            )
        try:
            source = table.resolve(model_id, files=HANDLERS[task].library != "builtin")
        except UnknownModel as exc:
            return error(UNSERVABLE, str(exc))
        try:
            body = await asyncio.wait_for(_body(request, max_body_bytes), limits.body_seconds)
            parsed = decode(task, body, request.headers.get("content-type", ""), chat=chat)
            call_seed = parsed.seed if parsed.seed is not None else seed
            for _, media in parsed.calls:  # before any model is loaded or any pixel decoded
                for kind, file in media.items():
                    limits.check(file.data, kind)
        except BadInput as exc:
            return error(BAD_REQUEST, f"{model_id} ({task}): {exc}")
        except MediaRefused as exc:
            return error(exc.status, f"{model_id} ({task}): {exc}")
        except TooLarge as exc:
            return error(413, str(exc))
        except TimeoutError:  # a client that stalls mid-body must not hold the connection
            return error(408, f"the request body did not arrive within {limits.body_seconds:g} s")
        outputs, batch = [], 0
        for inputs, media in parsed.calls:
            job = Job(task, model_id, source, inputs, media, call_seed, telemetry.carrier(), time.time_ns())
            reply = await _run(backend, job, request)
            if not reply.ok:
                return error(reply.status, reply.error)
            outputs.append(reply.outputs)
            batch = max(batch, reply.batch_size)
        try:
            content_type, data = encode(task, outputs, chat=chat, model=model_id)
        except (ValueError, KeyError, TypeError) as exc:
            return error(FAILED, f"{model_id} ({task}): unexpected model output: {exc}")
        return Response(data, media_type=content_type, headers={BATCH_HEADER: str(batch)})

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/models", models, methods=["GET"]),
            Route("/models/{path:path}", infer, methods=["POST"]),
            Route("/metrics", measured.scrape, methods=["GET"]),
        ],
        middleware=[  # one client's share of the connections (serve.fair)
            Middleware(FairShare, per_client=limits.per_client(), trusted_proxies=limits.trusted_proxies)
        ],
    )
