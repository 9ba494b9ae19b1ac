"""An OpenAI-compatible API on the app's port: GET /v1/models, POST /v1/chat/completions.

Off (404) unless `api_keys` (HUGGINGGPT_API_KEYS, comma-separated bearer tokens) is set: every call
spends the server's LLM key and GPU. Each call is stateless (webui.doors.calls): its own workspace, the
limits every door shares, credentials for another LLM from X-LLM-* headers. The answer is the
pipeline's, followed by the generated files as absolute links; the extra `hugginggpt` field lists
the tasks, their models and outputs. Streamed replies send the stages as `reasoning_content`
deltas, which Open WebUI and others show as the model's thinking.
"""

from __future__ import annotations

import contextvars
import hmac
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route

from hugginggpt.commands.progress import describe
from hugginggpt.run.events import AnswerDelta, Done, ErrorKind, Outcome, TaskProgress
from webui.doors.api_files import MAX_FILES, InputRefused, answer_with_urls, result_json, root_url
from webui.doors.calls import Accepted, Calls, Credentials, Finished, TokensSpent, drive
from webui.doors.openai_messages import files_markdown, read_messages
from webui.host.limit_words import for_server
from webui.host.slots import Busy

log = logging.getLogger(__name__)

MODEL = "hugginggpt"
INTERNAL = "Internal error; the server log has the details."
HEARTBEAT_SECONDS = 15.0  # an SSE comment this often keeps proxies from closing a quiet stream
# Reasoning is a log, not a line to redraw: a download shows in it this often at most (a new phase at
# once).
PROGRESS_SECONDS = 5.0
# A failed run's status: bad input is the client's; a plan or LLM failure is the upstream LLM's.
_FAILURES = {
    ErrorKind.INPUT: (400, "invalid_request_error", "invalid_input"),
    ErrorKind.PLAN: (422, "invalid_request_error", "no_valid_plan"),
    ErrorKind.LLM: (502, "api_error", "llm_error"),
    ErrorKind.INTERNAL: (500, "server_error", "internal_error"),
}


def routes(calls: Calls) -> Mount:
    """The API as one Starlette route for FastAPI's `routes` (app_kwargs in app.launch_options)."""
    api = _API(calls)
    return Mount(
        "/v1",
        app=Starlette(
            routes=[
                Route("/models", api.models, methods=["GET"]),
                Route("/models/{model:path}", api.model, methods=["GET"]),
                Route("/chat/completions", api.chat_completions, methods=["POST"]),
                Route("/{rest:path}", api.not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH"]),
            ]
        ),
    )


def error(
    status: int, message: str, kind: str = "invalid_request_error", code: str | None = None
) -> Response:
    """OpenAI's error shape."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


class _API:
    def __init__(self, calls: Calls):
        self.calls = calls
        self.keys = [k.encode() for k in calls.host.settings.api_keys]

    def _refused(self, request: Request) -> Response | None:
        """None when the bearer token is one of the keys (compared in constant time)."""
        if not self.keys:
            return error(
                404,
                "The OpenAI-compatible API is off: set HUGGINGGPT_API_KEYS to turn it on.",
                code="api_off",
            )
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        given = token.strip().encode()
        matched = False
        for key in self.keys:  # every key is compared, so the time taken says nothing about which
            matched |= hmac.compare_digest(given, key)
        if scheme.lower() != "bearer" or not given or not matched:
            return error(
                401, "Missing or wrong API key: send 'Authorization: Bearer <key>'.", code="invalid_api_key"
            )
        return None

    async def models(self, request: Request) -> Response:
        return self._refused(request) or JSONResponse({"object": "list", "data": [_model_card()]})

    async def model(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        if request.path_params["model"] != MODEL:
            return error(
                404, f"The model '{request.path_params['model']}' does not exist.", code="model_not_found"
            )
        return JSONResponse(_model_card())

    async def not_found(self, request: Request) -> Response:
        return self._refused(request) or error(404, f"No route {request.url.path}.", code="not_found")

    async def chat_completions(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused:
            return refused
        body = await _read_json(
            request, limit=(MAX_FILES * self.calls.host.max_upload_bytes * 4) // 3 + 1_000_000
        )
        if isinstance(body, Response):
            return body
        if body.get("model") != MODEL:
            return error(
                404, f"The model '{body.get('model')}' does not exist; use '{MODEL}'.", code="model_not_found"
            )
        if body.get("n") not in (None, 1):
            return error(400, "Only n=1 is supported.", code="invalid_n")
        try:
            conversation = read_messages(body.get("messages"))
        except InputRefused as e:
            return error(400, str(e), code="invalid_messages")
        credentials = Credentials.from_headers(request.headers)
        caller_key = request.headers.get("authorization", "").partition(" ")[2].strip()  # checked above
        url = root_url(request)
        caller = self.calls.host.caller(request)
        context = contextvars.copy_context()

        def work(cancelled: threading.Event):
            return self.calls.pipeline_call(
                conversation.request,
                conversation.files,
                credentials,
                root_url=url,
                cancelled=cancelled,
                history=conversation.history,
                context=context,
                caller_key=caller_key,
                caller=caller,
            )

        items = drive(work, heartbeat=HEARTBEAT_SECONDS)
        try:
            accepted = await _until_accepted(items, request)
        except TokensSpent as e:
            await items.aclose()
            return error(429, str(e), code="rate_limit_exceeded")
        except InputRefused as e:
            await items.aclose()
            return error(400, str(e), code="invalid_input")
        except Busy as e:
            await items.aclose()
            return error(503, str(e), "server_error", "server_busy")
        except Exception:  # a bug: logged with its stack trace, reported without it
            log.exception("a chat completion failed before it ran")
            await items.aclose()
            return error(500, INTERNAL, "server_error", "internal_error")
        if accepted is None:
            await items.aclose()
            return error(499, "The client went away.", code="cancelled")
        reply = _Reply(accepted, include_usage=bool((body.get("stream_options") or {}).get("include_usage")))
        if body.get("stream"):
            return StreamingResponse(
                reply.stream(items),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        return await reply.whole(items, request)


class _Reply:
    """One completion: the events of a run turned into OpenAI's answer, whole or as chunks."""

    def __init__(self, accepted: Accepted, *, include_usage: bool = False):
        self.root = accepted.root
        self.id = "chatcmpl-" + uuid.uuid4().hex
        self.created = int(time.time())
        self.include_usage = include_usage
        self.reasoning: list[str] = []
        self.answer: list[str] = []
        self._progress: dict[int, tuple[str, float]] = {}  # per task: its phase and when it was shown

    def _feed(self, item: Any) -> tuple[str, str]:
        """(reasoning, content) text this item adds."""
        if isinstance(item, AnswerDelta):
            self.answer.append(item.text)
            return "", item.text
        if isinstance(item, TaskProgress) and not self._shows(item):
            return "", ""
        line = describe(item, self.root) if item is not None and not isinstance(item, Finished) else None
        if line:
            self.reasoning.append(line + "\n")
            return line + "\n", ""
        return "", ""

    def _shows(self, progress: TaskProgress) -> bool:
        now = time.monotonic()
        shown = self._progress.get(progress.task_id)
        if shown is not None and shown[0] == progress.phase and now - shown[1] < PROGRESS_SECONDS:
            return False
        self._progress[progress.task_id] = (progress.phase, now)
        return True

    async def whole(self, items: AsyncGenerator[Any, None], request: Request) -> Response:
        finished = None
        try:
            async with aclosing(items):
                async for item in items:
                    if item is None and await request.is_disconnected():
                        return error(499, "The client went away.", code="cancelled")
                    if isinstance(item, Finished):
                        finished = item
                    self._feed(item)
        except Exception:
            log.exception("a chat completion failed")
            return error(500, INTERNAL, "server_error", "internal_error")
        failure = _failure(finished)
        if failure is not None:
            return failure
        assert finished is not None
        content = answer_with_urls("".join(self.answer), finished.served) + files_markdown(finished)
        message = {"role": "assistant", "content": content, "reasoning_content": "".join(self.reasoning)}
        return JSONResponse(
            {
                **self._head("chat.completion"),
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": _usage(finished.done),
                MODEL: _details(finished),
            }
        )

    async def stream(self, items: AsyncGenerator[Any, None]) -> AsyncIterator[str]:
        finished, broken = None, False
        try:
            async with aclosing(items):
                yield self._chunk({"role": "assistant", "content": ""})
                async for item in items:
                    if item is None:
                        yield ": keep-alive\n\n"
                        continue
                    if isinstance(item, Finished):
                        finished = item
                    reasoning, content = self._feed(item)
                    if reasoning:
                        yield self._chunk({"reasoning_content": reasoning})
                    if content:
                        yield self._chunk({"content": content})
        except Exception:
            log.exception("a streamed chat completion failed")
            broken = True
        failure = error(500, INTERNAL, "server_error", "internal_error") if broken else _failure(finished)
        if failure is not None:
            yield f"data: {bytes(failure.body).decode()}\n\n"
        else:
            assert finished is not None
            files = files_markdown(finished)
            if files:
                yield self._chunk({"content": files})
            yield self._chunk({}, finish_reason="stop", **{MODEL: _details(finished)})
            if self.include_usage:
                yield _sse(
                    {**self._head("chat.completion.chunk"), "choices": [], "usage": _usage(finished.done)}
                )
        yield "data: [DONE]\n\n"

    def _head(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": MODEL}

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return _sse({**self._head("chat.completion.chunk"), "choices": [choice], **extra})


async def _until_accepted(items: AsyncIterator[Any], request: Request) -> Accepted | None:
    """Wait until the call's inputs are accepted and it holds a slot (None: the client left)."""
    async for item in items:
        if isinstance(item, Accepted):
            return item
        if item is None and await request.is_disconnected():
            return None
    return None


def _failure(finished: Finished | None) -> Response | None:
    if finished is None or finished.done.outcome is Outcome.CANCELLED:
        return error(499, "The request was cancelled.", code="cancelled")
    done: Done = finished.done
    if done.outcome is Outcome.FAILED:
        status, kind, code = _FAILURES[done.error_kind or ErrorKind.INTERNAL]
        return error(status, for_server(done.error or "failed"), kind, code)
    return None


def _details(finished: Finished) -> dict[str, Any]:
    return result_json(finished.done, finished.served)


def _usage(done: Done) -> dict[str, Any]:
    usage = done.usage
    spent: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "by_stage": usage.to_json()["by_stage"],  # added, as the cost below (at the operator's prices)
    }
    if usage.cost is not None:
        spent["cost"] = usage.cost
    return spent


def _model_card() -> dict[str, Any]:
    return {"id": MODEL, "object": "model", "created": 0, "owned_by": "hugginggpt"}


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


async def _read_json(request: Request, *, limit: int) -> dict[str, Any] | Response:
    """The body as a JSON object, read no further than `limit` bytes."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return error(413, f"The request body is over {limit / 1e6:.0f} MB.", code="request_too_large")
        chunks.append(chunk)
    try:
        body = json.loads(b"".join(chunks) or b"null")
    except (ValueError, UnicodeDecodeError):
        return error(400, "The request body is not valid JSON.", code="invalid_json")
    if not isinstance(body, dict):
        return error(400, "The request body must be a JSON object.", code="invalid_json")
    return body
