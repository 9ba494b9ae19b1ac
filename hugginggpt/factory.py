"""Build the pipeline's parts from settings: one place for the CLI, the app and the eval harness."""

from __future__ import annotations

from pathlib import Path

from hugginggpt.catalog import Catalog, load_catalog
from hugginggpt.config import Settings
from hugginggpt.endpoints import Endpoint, build_endpoint
from hugginggpt.llms.interface import LLM, LLMLimits
from hugginggpt.llms.local import LocalChatLLM
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.run.cache import ResultCache, cache_root
from hugginggpt.run.pipeline import Pipeline

DEFAULT_SERVER_MODEL = "gpt-4o-mini"


def build_llm(settings: Settings, *, public_only: bool = False) -> LLM:
    """An OpenAI-compatible server when a base URL or key is set, else a local transformers model.

    `public_only`: every request (redirects and retries too) must go to a public address, for a
    base URL that a visitor of a public app typed."""
    limits = LLMLimits(max_reply_chars=settings.llm_max_reply_chars, max_seconds=settings.llm_call_seconds)
    if settings.uses_server:
        return OpenAICompatibleLLM(
            base_url=settings.llm_base_url,
            model=settings.llm_model or DEFAULT_SERVER_MODEL,
            api_key=settings.llm_api_key,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
            public_only=public_only,
            limits=limits,
        )
    return LocalChatLLM(settings.llm_model or settings.local_llm_model, limits=limits)


def build_catalog(settings: Settings) -> Catalog:
    return load_catalog([Path(p) for p in settings.catalog_paths])


def build_cache(settings: Settings) -> ResultCache | None:
    """The result cache the settings ask for; None when cache_max_bytes is 0."""
    if settings.cache_max_bytes <= 0:
        return None
    return ResultCache(cache_root(settings.cache_dir, settings.workdir), settings.cache_max_bytes)


def build_pipeline(
    settings: Settings,
    *,
    llm: LLM | None = None,
    catalog: Catalog | None = None,
    endpoint: Endpoint | None = None,
) -> Pipeline:
    return Pipeline(
        llm=llm or build_llm(settings),
        catalog=catalog or build_catalog(settings),
        endpoint=endpoint
        or build_endpoint(
            settings.inference,
            hf_token=settings.hf_token,
            provider=settings.hf_provider,
            experts_url=settings.experts_url,
        ),
        settings=settings,
        cache=build_cache(settings),
    )
