"""Hosted inference: run a task through huggingface_hub's InferenceClient.

A model card with `endpoint_url` is called at that URL (an Inference Endpoint, a TGI server, any
server speaking the HF inference protocol); otherwise the hub id goes to an inference provider:
the configured one, or with "auto" the first that serves the model live for the task, from the
Hub's provider mapping (hosted_routes.py). What each task sends and how its answer becomes
artifacts is in hosted_tasks.py. A card without a URL must have a Hub id (model_ids.py); where the
HF token may go is decided by the transport alone (transport.py).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from typing import Any, NamedTuple

from hugginggpt.catalog import ModelCard
from hugginggpt.catalog.card import ProviderRoute
from hugginggpt.catalog.model_ids import hub_id_problem
from hugginggpt.endpoints import transport
from hugginggpt.endpoints.base import (
    Call,
    Endpoint,
    EndpointError,
    Footprint,
    ModelUnavailable,
    Result,
    Stopped,
    StopSignal,
)
from hugginggpt.endpoints.hosted_routes import AUTO, NO_TOKEN_NEEDED, ProviderBook, pick, why_not
from hugginggpt.endpoints.hosted_tasks import CONTROLNET_OPS, OPS, TaskOp, to_artifacts
from hugginggpt.plain_errors import in_words
from hugginggpt.text import shorten

log = logging.getLogger(__name__)

RETRY_STATUS = {503: "the model is still loading (HTTP 503)", 429: "rate limited (HTTP 429)"}
REFUSED_STATUS = (401, 403, 404)  # the model is not there for us: the endpoint cannot serve it


class HostedEndpoint(Endpoint):
    name = "hosted"

    def __init__(
        self,
        *,
        token: str | None = None,
        provider: str | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 2.0,
        max_wait: float = 30.0,
        providers: ProviderBook | None = None,
    ) -> None:
        """`retries`: extra tries after a 503 (model loading) or 429 (rate limit), waiting
        `backoff` * 2**n seconds (or what the server asks, at most `max_wait`) in between.
        `providers`: where the provider mapping of a card without one is looked up."""
        self.token = _clean(token if token is not None else os.environ.get("HF_TOKEN"))
        self.provider = provider or AUTO
        self.providers = providers or ProviderBook(self.token)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_wait = max_wait
        transport.install()

    def describe(self) -> str:
        return f"hosted (huggingface_hub InferenceClient, provider {self.provider})"

    def _op(self, task: str, model: ModelCard) -> TaskOp | None:
        return OPS.get(task) or (CONTROLNET_OPS.get(task) if model.endpoint_url else None)

    def can_run(self, model: ModelCard) -> bool:
        """A URL card: when the hf-inference protocol speaks the task. A hub id: when a provider
        serves it live for the task (the named one, or any with "auto"), or the Hub cannot be asked."""
        from huggingface_hub import constants

        return not constants.is_offline_mode() and self.route(model.task, model).refusal is None

    def footprint(self, model: ModelCard) -> Footprint:
        """Nothing on this machine; the cost of one call when the provider it goes to has a price."""
        route = self.route(model.task, model).route
        cost = route.price_usd if route is not None else None
        return Footprint("hosted", size_bytes=model.size_bytes, cost_usd=cost)

    def route(self, task: str, model: ModelCard, token: str | None = None) -> Route:
        """The one decision of where a call of `task` with `model` goes, made once per call (can_run,
        footprint and run each ask it once). `token`: the caller's, else the server's."""
        from huggingface_hub import get_token

        op = self._op(task, model)
        if op is None:
            return Route(
                None, self.provider, None, f"{model.id}: hosted inference has no method for task {task!r}"
            )
        if model.endpoint_url:  # a URL always goes through the hf-inference protocol
            why = None if op.by_url else f"{model.id}: {task} cannot be called at a model's URL"
            return Route(op, NO_TOKEN_NEEDED, None, why)
        if problem := hub_id_problem(model.id):  # a URL or a path in a card: never called
            return Route(
                op,
                self.provider,
                None,
                f"{shorten(repr(model.id), 120)} is not a Hugging Face model id: {problem}",
            )
        if model.path:  # a local folder: no hosted counterpart
            return Route(op, self.provider, None, f"{model.id}: a local folder has no hosted counterpart")
        have_token = bool(token or self.token or get_token())
        if not have_token and self.provider not in (AUTO, NO_TOKEN_NEEDED):
            why = f"{model.id}: provider {self.provider} needs an HF token (HF_TOKEN), and none is set"
            return Route(op, self.provider, None, why)
        served = self.providers.served(model)
        if served is None:  # the Hub could not be asked: the call decides
            return Route(op, self.provider, None, None)
        route = pick(served.routes, self.provider, op.hf_task, model.task, have_token=have_token)
        if route is not None:
            return Route(op, route.provider, route, None)
        why = why_not(served, self.provider, op.hf_task, have_token=have_token)
        return Route(op, self.provider, None, f"{model.id}: {why}")

    def _client(
        self, model: ModelCard, provider: str, token: str | None, timeout: float, headers: dict[str, str]
    ) -> Any:
        """`headers`: the call's own (transport.carrying: its stop reaches an expert server)."""
        from huggingface_hub import InferenceClient

        transport.install()  # the token rule, even if somebody replaced huggingface_hub's client since
        if model.endpoint_url:
            return InferenceClient(model=model.endpoint_url, token=token, timeout=timeout, headers=headers)
        return InferenceClient(
            model=model.id,
            provider=provider,  # type: ignore[arg-type]  # a Literal of the providers it knew when released
            token=token,
            timeout=timeout,
            headers=headers,
        )

    def run(self, task: str, model: ModelCard, inputs: dict[str, Any], call: Call) -> Result:
        # `call.stop` ends the retries, and a call in flight to an expert server (transport.py); one to
        # another host cannot be taken back (the time-out bounds it).
        # A signed-in visitor's token pays for their calls; else the server's.
        token = _clean(call.credentials.hf_token) or self.token
        op, provider, _, refusal = self.route(task, model, token)
        if refusal is not None or op is None:  # known before any request: the next candidate gets the turn
            raise ModelUnavailable(refusal)
        where = f"{model.id} at {model.endpoint_url}" if model.endpoint_url else f"{model.id} ({provider})"
        try:
            with transport.carrying(call.stop) as headers:
                client = self._client(model, provider, token, call.seconds_left(self.timeout), headers)
                result = self._call_with_retries(op, client, inputs, where, call.stop)
        except EndpointError as exc:  # messages reach the chat, traces and the LLM: never a token
            if call.stop is not None and call.stop.is_set():  # the call was abandoned on purpose
                raise Stopped(f"{where}: stopped") from None
            raise type(exc)(_redact(str(exc), token)) from None
        try:
            return Result(outputs=to_artifacts(op, result, inputs, call.out_dir, task), answered_by=self.name)
        except Exception as exc:
            message = f"{where}: unexpected output for {task}: {shorten(exc)}"
            raise EndpointError(_redact(message, token)) from exc

    def _call_with_retries(
        self, op: TaskOp, client: Any, inputs: dict[str, Any], where: str, stop: StopSignal | None = None
    ) -> Any:
        """The call, retried on 503/429. Failures are classified by exception type and HTTP status:
        401/403/404 (a missing, private or gated model: huggingface_hub's RepositoryNotFoundError
        and GatedRepoError are HfHubHTTPErrors) and offline mode refuse the model; the rest fail."""
        from huggingface_hub.errors import HfHubHTTPError, InferenceTimeoutError, OfflineModeIsEnabled

        for attempt in range(self.retries + 1):
            try:
                return op.call(client, inputs)
            except InferenceTimeoutError:
                raise EndpointError(f"{where}: no answer within {client.timeout:g} s (time-out)") from None
            except OfflineModeIsEnabled:
                raise ModelUnavailable(f"{where}: hosted inference is off (HF_HUB_OFFLINE is set)") from None
            except HfHubHTTPError as exc:
                status = exc.response.status_code if exc.response is not None else None
                if status in RETRY_STATUS:
                    if attempt < self.retries:
                        wait = self._wait(exc.response, attempt)
                        log.info(
                            "%s: %s; retry %d of %d in %.2f s",
                            _redact(where, self.token),
                            RETRY_STATUS[status],
                            attempt + 1,
                            self.retries,
                            wait,
                        )
                        time.sleep(wait)
                        if stop is not None and stop.is_set():
                            raise Stopped(f"{where}: stopped") from None
                        continue
                    tries = self.retries + 1
                    raise EndpointError(
                        f"{where}: {RETRY_STATUS[status]}, gave up after {tries} tries"
                    ) from None
                detail = exc.server_message or shorten(exc)
                error = ModelUnavailable if status in REFUSED_STATUS else EndpointError
                raise error(f"{where}: HTTP {status}: {shorten(detail)}") from None
            except (KeyError, FileNotFoundError) as exc:
                raise EndpointError(f"{where}: missing input {shorten(exc)}") from None
            except Exception as exc:  # noqa: BLE001 (connection refused, DNS, a malformed reply, ...)
                raise EndpointError(f"{where}: {in_words(exc)}") from None
        raise AssertionError("unreachable")

    def _wait(self, response: Any, attempt: int) -> float:
        """What the server asks for (Retry-After, or HF's estimated_time while loading), bounded."""
        wait = self.backoff * 2**attempt
        asked = response.headers.get("retry-after")
        if asked is None:
            try:
                asked = json.loads(response.content).get("estimated_time")
            except (ValueError, AttributeError, RuntimeError):  # not JSON, not an object, not read
                asked = None
        try:
            wait = float(asked) if asked is not None else wait
        except ValueError:
            pass
        return max(0.0, min(wait, self.max_wait))


_SECRETS = (re.compile(r"(?i)\b(bearer\s+)\S+"), re.compile(r"\bhf_[A-Za-z0-9]{30,}"))


class Route(NamedTuple):
    """Where one call goes: the task's protocol call (None: hosted inference has none), the provider
    (hf-inference for a URL), its Hub route (None: not known), and why the model cannot be served
    here, in words for the chat and the LLM (None: it can, or the Hub could not be asked, so the
    call decides)."""

    op: TaskOp | None
    provider: str
    route: ProviderRoute | None
    refusal: str | None


def _clean(token: str | None) -> str | None:
    """A token pasted with its line ending (a .env file saved on Windows) is no valid header."""
    return token.strip() or None if token else None


def _redact(message: str, token: str | None) -> str:
    """The message without the token: an HTTP library may quote the header it refused."""
    if token:
        message = message.replace(token, "***")
    message = _SECRETS[0].sub(lambda m: m.group(1) + "***", message)
    return _SECRETS[1].sub("hf_***", message)
