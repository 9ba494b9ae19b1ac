"""What every door shares: the page's chat engine, the OpenAI-compatible API and the MCP server all ask
one Host.

It owns the settings, the catalog, the LLM clients and endpoints (webui.host.backends), the result cache,
the slots (requests answered at once), the daily token ledger, the one run entry (webui.host.run_entry)
and who is calling (webui.host.callers). Conversations are the chat engine's (webui.chat.engine), not
the host's: a door for other programs keeps none. Imports nothing of the chat, the doors or the page.
"""

from __future__ import annotations

import contextvars
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings
from hugginggpt.endpoints import Credentials, Endpoint
from hugginggpt.factory import build_catalog
from hugginggpt.llms.interface import LLM
from hugginggpt.observability import metrics
from hugginggpt.run.cache import ResultCache
from hugginggpt.run.pipeline import Pipeline
from webui.host.backends import Backends
from webui.host.callers import Callers
from webui.host.charged_llm import ChargedLLM
from webui.host.gpu import visitor_ip_token
from webui.host.run_entry import RunEntry
from webui.host.session_settings import LLMChoice, merge_settings
from webui.host.slots import RunSlots
from webui.host.token_budget import DailyTokens

log = logging.getLogger(__name__)

SPACE_STORAGE = Path("/data")  # a Space's persistent storage, when the Space has it

CONFIGURE_HINT = (
    "To fix this, open **Settings** below the chat and set the **LLM base URL** of an OpenAI-compatible "
    "server (for example `https://api.openai.com/v1`, `https://router.huggingface.co/v1` for Hugging Face "
    "Inference Providers, or `http://localhost:11434/v1` for a local Ollama), the **LLM model** it serves, "
    "and an **API key** if it needs one. Whoever runs the app can set them for everyone with the environment "
    "variables `HUGGINGGPT_LLM_BASE_URL`, `HUGGINGGPT_LLM_MODEL` and `OPENAI_API_KEY`."
)


class Host:
    def __init__(
        self,
        settings: Settings,
        *,
        catalog: Catalog | None = None,
        endpoint: Endpoint | None = None,
        llm: LLM | None = None,
        max_upload_bytes: int | None = None,
        public_llm_only: bool | None = None,
        concurrency: int | None = None,
    ):
        settings = replace(settings, workdir=str(work_folder(settings)))  # /data on a Space that has it
        self.settings = settings
        self.catalog = catalog if catalog is not None else build_catalog(settings)
        self.max_upload_bytes = max_upload_bytes or settings.max_upload_bytes
        # On a public app a typed base URL must not reach the host's private network.
        self.public_llm_only = settings.is_public if public_llm_only is None else public_llm_only
        self.workdir = Path(settings.workdir).resolve()
        self.backends = Backends(settings, llm=llm, endpoint=endpoint, public=self.public_llm_only)
        self.slots = RunSlots(concurrency or settings.app_concurrency)  # every door's requests at once
        self.callers = Callers(settings.proxies, ipv6_prefix=settings.caller_ipv6_prefix)
        # On a public app, each visitor's LLM tokens a day (one table for every door).
        self.tokens = DailyTokens(settings.visitor_daily_tokens if self.public_llm_only else 0)
        self.entry = RunEntry(self.tokens, self.slots, self.pipeline)  # where every visitor's run starts
        metrics.watch(slots_in_use=lambda: self.slots.running)
        self.refused_entries = sum(": warning: " not in p for p in self.catalog.problems)
        for problem in self.catalog.problems:  # the operator reads the details in the log
            log.warning("catalog: %s", problem)

    @property
    def cache(self) -> ResultCache | None:
        return self.backends.cache

    # ---- admission -------------------------------------------------------------------------------

    def caller(self, request: Any) -> str:
        """Who is calling: a Starlette request's or a gr.Request's address (webui.host.callers)."""
        return self.callers.of(request)

    # ---- what a request runs with ----------------------------------------------------------------

    def request_settings(self, choice: LLMChoice, *, resolve: bool = True) -> Settings:
        """The server's settings with one caller's choices; raises ValueError for bad input."""
        return merge_settings(self.settings, choice, public=self.public_llm_only, resolve=resolve)

    def llm_for(self, s: Settings) -> LLM:
        return self.backends.llm_for(s)

    def pipeline(
        self,
        s: Settings,
        *,
        caller: str,
        context: contextvars.Context | None = None,
        hf_token: str | None = None,
        cached: bool = True,
        cache_scope: str | None = None,
    ) -> Pipeline:
        """A pipeline with settings `s` for one visitor's run, whichever door or action starts it:
        every LLM call it makes is charged to `caller` before it is made (webui.host.charged_llm).
        `context` is the request's (ZeroGPU reads it), `hf_token` a signed-in visitor's;
        `cached=False` keeps no result, `cache_scope` names whose results these are."""
        llm = self.llm_for(s)
        if self.tokens.limit:
            llm = ChargedLLM(llm, self.tokens, caller)
        return Pipeline(
            llm=llm,
            catalog=self.catalog,
            endpoint=self.backends.endpoint_for(s.inference, context),
            settings=s,
            cache=self.cache if cached else None,
            cache_scope=cache_scope,
            credentials=Credentials(hf_token=hf_token, ip_token=visitor_ip_token(context)),
        )

    def welcome(self) -> str:
        """What an empty chat says (its placeholder): empty unless the app has no LLM server."""
        if self.settings.uses_server:
            return ""
        return (
            f"No LLM server is configured, so the controller is the local model "
            f"`{self.settings.local_llm_model}` (downloaded on first use, slow without a GPU). "
            + CONFIGURE_HINT
        )


def work_folder(settings: Settings, *, space_storage: Path = SPACE_STORAGE) -> Path:
    """The work folder: the setting, except that on a Space with persistent storage the default goes
    there (the rest of a Space's disk is lost on every restart)."""
    if settings.space_id and settings.workdir == Settings.workdir and os.access(space_storage, os.W_OK):
        return space_storage / "hugginggpt"
    return Path(settings.workdir)
