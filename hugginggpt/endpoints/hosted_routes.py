"""Which inference provider serves a model: the Hub's provider mapping, read from the card or asked once.

`catalog refresh` stores each model's mapping on its card (`ModelCard.providers`). A card without
one (the shipped catalog, most user entries) is looked up on the Hub the first time it is offered
(`HfApi.model_info(expand=["inferenceProviderMapping"])`, one small request, kept for an hour).
When the Hub cannot be asked, the model stays offered and the call itself decides.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from hugginggpt.catalog import ModelCard
from hugginggpt.catalog.card import ProviderRoute
from hugginggpt.catalog.hub import network_errors, provider_routes

log = logging.getLogger(__name__)

AUTO = "auto"
NO_TOKEN_NEEDED = "hf-inference"  # huggingface_hub calls it without a token; other providers need one
LOOKUP_TTL = 3600.0  # seconds a looked-up mapping is trusted
FAILURE_TTL = 60.0  # seconds a failed lookup is not retried (per model; all models when unreachable)
LOOKUP_TIMEOUT = 10.0  # seconds for one mapping request


@dataclass(frozen=True)
class Served:
    """What the Hub says about a model's providers."""

    routes: tuple[ProviderRoute, ...]
    missing: bool = False  # the Hub has no such model (or it is private)


def serves(route: ProviderRoute, hf_task: str, card_task: str) -> bool:
    """Whether `route` can take the client's `hf_task` call now. huggingface_hub requires the
    mapping's task to equal the call's, except for hf-inference, which checks the model's pipeline
    tag (so a text2text model mapped as such takes text-generation calls)."""
    if not route.live:
        return False
    return route.task == hf_task or (route.provider == "hf-inference" and route.task == card_task)


def pick(
    routes: Sequence[ProviderRoute], provider: str, hf_task: str, card_task: str, *, have_token: bool
) -> ProviderRoute | None:
    """The route to call: with "auto" the first live one for the task (the Hub lists them in the
    account's provider order), else the named provider's; None when none fits."""
    for route in routes:
        if provider != AUTO and route.provider != provider:
            continue
        if not have_token and route.provider != NO_TOKEN_NEEDED:
            continue
        if serves(route, hf_task, card_task):
            return route
    return None


def why_not(served: Served, provider: str, hf_task: str, *, have_token: bool) -> str:
    """Why no route in `served` fits, for the error the executor reports and the LLM reads."""
    if served.missing:
        return "not found on the Hub (or private)"
    listed = ", ".join(f"{r.provider} ({r.status}, {r.task})" for r in served.routes) or "none"
    who = "no inference provider serves it" if provider == AUTO else f"provider {provider} does not serve it"
    text = f"{who} live for {hf_task} (the Hub lists: {listed})"
    if not have_token and any(r.provider != NO_TOKEN_NEEDED for r in served.routes):
        text += "; providers other than hf-inference need an HF token (HF_TOKEN)"
    return text


class ProviderBook:
    """Providers per model: the card's stored mapping, else the Hub's, asked once and kept."""

    def __init__(self, token: str | None, *, ttl: float = LOOKUP_TTL, timeout: float = LOOKUP_TIMEOUT):
        self.token = token
        self.ttl = ttl
        self.timeout = timeout
        # model id -> (kept until, what the Hub said; None: it could not say)
        self._cache: dict[str, tuple[float, Served | None]] = {}
        self._unreachable_until = 0.0  # no lookups at all until then: a hung Hub costs one time-out
        self._lock = threading.Lock()  # one book serves every conversation of the app

    def served(self, model: ModelCard) -> Served | None:
        """None when the card has no mapping and the Hub cannot be asked (let the call decide)."""
        if model.providers is not None:
            return Served(model.providers)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(model.id)
            if hit is not None and now < hit[0]:
                return hit[1]
            if now < self._unreachable_until:
                return None
        found, reachable = self._ask(model.id)
        with self._lock:
            self._cache[model.id] = (now + (self.ttl if found is not None else FAILURE_TTL), found)
            if not reachable:
                self._unreachable_until = now + FAILURE_TTL
        return found

    def _ask(self, model_id: str) -> tuple[Served | None, bool]:
        """What the Hub says, and whether it could be reached at all."""
        from huggingface_hub import HfApi
        from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

        from hugginggpt.endpoints import transport

        transport.install()  # the HF token goes only to Hugging Face's hosts (transport.py)
        try:
            info = HfApi().model_info(
                model_id, expand=["inferenceProviderMapping"], token=self.token, timeout=self.timeout
            )
        except RepositoryNotFoundError:  # also what a private or gated-and-hidden repo answers
            return Served((), missing=True), True
        except (HfHubHTTPError, ValueError) as exc:  # HTTP 5xx or 429, an id the Hub refuses
            log.info(
                "the Hub could not say which providers serve %s (%s); the call will decide", model_id, exc
            )
            return None, True
        except network_errors() as exc:
            log.info("the Hub cannot be reached (%s); hosted calls decide for %g s", exc, FAILURE_TTL)
            return None, False
        return Served(provider_routes(info) or ()), True
