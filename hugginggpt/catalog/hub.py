"""Refresh: live model facts from the Hugging Face Hub, written as a user catalog file.

`HfApi.list_models(pipeline_tag=..., sort="downloads", expand=[...])` gives the facts, including
which inference providers serve each model (`inferenceProviderMapping`); each model's README gives
a short description (its first paragraph of prose), fetched on the user's machine.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hugginggpt.catalog.card import ModelCard, ProviderRoute
from hugginggpt.catalog.describe import describe
from hugginggpt.catalog.facts import Facts, hub_facts
from hugginggpt.catalog.rules import is_local
from hugginggpt.tasks import CONTROLS, TASKS

if TYPE_CHECKING:
    from huggingface_hub.hf_api import ExpandModelProperty_T

CARD_WORKERS = 8  # model cards fetched at the same time
# fmt: off
EXPAND: list[ExpandModelProperty_T] = ["downloads", "likes", "library_name", "pipeline_tag", "tags",
                                      "cardData", "safetensors", "inferenceProviderMapping"]
# fmt: on
# fmt: off
DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2,
               "I16": 2, "U16": 2, "I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
# fmt: on
# Hub tags that say nothing about what a model does.
# fmt: off
NOISE_TAGS = ("region:", "license:", "dataset:", "arxiv:", "doi:", "endpoints_compatible",
              "autotrain_compatible", "text-generation-inference", "has_space", "safetensors", "pytorch",
              "tf", "jax", "deploy:", "model-index", "library:", "diffusers:", "custom_code")
# fmt: on
# The Hub's words for the ControlNet conditions (hed models are mostly published as "softedge").
CONTROL_SEARCH = {"hed": "softedge", "seg": "seg", "normal": "normal"}


class HubUnreachable(RuntimeError):
    """The Hub cannot be reached (offline mode, no network, server down)."""


def network_errors() -> tuple[type[BaseException], ...]:
    """What a failed Hub request raises: OSError subclasses, and the HTTP client's own errors
    (huggingface_hub 2.x talks through httpx2, whose errors are not OSErrors)."""
    try:
        import httpx2
    except ImportError:  # older huggingface_hub releases use httpx
        import httpx

        return (OSError, httpx.HTTPError)
    return (OSError, httpx2.HTTPError)


@dataclass(frozen=True)
class Query:
    task: str
    kwargs: dict[str, Any]


def hub_queries(task: str) -> list[Query]:
    """How to ask the Hub for a task's models; none for the control-image tasks (annotators)."""
    if task == "conversational":  # the Hub folded it into text-generation
        return [Query(task, {"pipeline_tag": "text-generation", "filter": "conversational"})]
    for control in CONTROLS:
        if task == f"{control}-text-to-image":
            word = CONTROL_SEARCH.get(control, control)
            return [Query(task, {"filter": "controlnet", "search": word})]
        if task == f"{control}-control":
            return []
    return [Query(task, {"pipeline_tag": task})]


def size_from_safetensors(info: Any) -> int | None:
    params = getattr(info, "parameters", None) if info is not None else None
    if not params:
        return None
    return sum(int(n) * DTYPE_BYTES.get(dtype, 4) for dtype, n in params.items())


def provider_routes(info: Any) -> tuple[ProviderRoute, ...] | None:
    """A ModelInfo's inference provider mapping as routes; None when the answer did not carry it."""
    mapping = getattr(info, "inference_provider_mapping", None)
    if mapping is None:
        return None
    return tuple(
        ProviderRoute(provider=str(m.provider), status=str(m.status), task=str(m.task)) for m in mapping
    )


def _as_tuple(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    values = value if isinstance(value, (list, tuple)) else [value]
    return tuple(dict.fromkeys(str(v) for v in values if str(v).strip()))


def _as_tuple_raw(value: Any) -> list[Any]:
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


def _language(value: Any) -> Any:
    """YAML reads the code `no` (Norwegian) as False, and `yes`/`on` would be True."""
    return "no" if value is False else value


def card_from_info(task: str, info: Any, card_text: str | None, facts: Facts | None = None) -> ModelCard:
    """`facts`: the weight files' total and the licence from the model's file listing, when asked."""
    data = info.card_data.to_dict() if getattr(info, "card_data", None) is not None else {}
    library = info.library_name or data.get("library_name")
    languages = _as_tuple([_language(v) for v in _as_tuple_raw(data.get("language"))])
    datasets = _as_tuple(data.get("datasets"))
    license_ = _as_tuple(data.get("license"))
    tags = tuple(
        t
        for t in _as_tuple(info.tags)
        if not t.startswith(NOISE_TAGS) and t not in (task, library, info.pipeline_tag) and t not in languages
    )[:12]
    description = summary(card_text) if card_text else ""
    if not description:
        description = describe(
            model_id=info.id, task=task, library=library, languages=languages, datasets=datasets, tags=tags
        )
    return ModelCard(
        id=info.id,
        task=task,
        downloads=int(info.downloads or 0),
        likes=int(info.likes or 0),
        description=description,
        library=library,
        local=is_local(task, library),
        size_bytes=(facts and facts.size_bytes) or size_from_safetensors(getattr(info, "safetensors", None)),
        license=license_[0] if license_ else (facts.license if facts else None),
        languages=languages,
        datasets=datasets,
        tags=tags,
        providers=provider_routes(info) or (),  # asked for (EXPAND): no mapping means no provider
    )


_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n---\s*\n", re.DOTALL)
_MARKUP = [
    (re.compile(r"<!--.*?-->", re.DOTALL), " "),
    (re.compile(r"<[^>]+>"), " "),
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), " "),
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),
    (re.compile(r"[*_`]{1,3}"), ""),
]


def summary(card_text: str, *, max_chars: int = 300) -> str:
    """The first paragraph of prose in a model card (no front matter, headings, tables or code)."""
    text = _FRONT_MATTER.sub("", card_text)
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)
    for paragraph in re.split(r"\n\s*\n", text):
        lines = [ln.strip() for ln in paragraph.strip().splitlines()]
        lines = [ln for ln in lines if ln and not ln.startswith(("#", "|", ">", "-", "*", "!", "[!"))]
        prose = " ".join(lines)
        for pattern, repl in _MARKUP:
            prose = pattern.sub(repl, prose)
        prose = " ".join(prose.split())
        if len(prose) >= 30 and " " in prose:
            return prose if len(prose) <= max_chars else prose[: max_chars - 3].rsplit(" ", 1)[0] + "..."
    return ""


def fetch_card_text(model_id: str) -> str | None:
    """The model's README.md, or None when it has none (or it cannot be read)."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.errors import OfflineModeIsEnabled
    from huggingface_hub.utils import build_hf_headers, get_session

    try:
        response = get_session().get(
            hf_hub_url(model_id, "README.md"), headers=build_hf_headers(), follow_redirects=True, timeout=30
        )
    except OfflineModeIsEnabled as err:
        raise HubUnreachable(str(err)) from err
    except network_errors():
        return None
    return response.text if response.status_code == 200 else None


def fetch_facts(model_id: str) -> Facts | None:
    """The size of the weight files the runtime would download, and the licence; None when the
    listing cannot be had (the card keeps what list_models said)."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    failed: tuple[type[BaseException], ...] = (HfHubHTTPError, ValueError, *network_errors())
    try:
        return hub_facts(model_id, timeout=30)
    except OfflineModeIsEnabled as err:
        raise HubUnreachable(str(err)) from err
    except failed:
        return None


def fetch(
    tasks: Iterable[str],
    *,
    limit: int,
    card_text: bool = True,
    sizes: bool = True,
    on_model: Callable[[str, str], None] = lambda task, model_id: None,
) -> Iterator[ModelCard]:
    """Cards for each task's most downloaded models, live from the Hub (HF_ENDPOINT honoured).

    `sizes`: one more request per model, for its file listing (the size the runtime downloads)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import OfflineModeIsEnabled

    api = HfApi()
    for task in tasks:
        for query in hub_queries(task):
            try:
                infos = list(api.list_models(sort="downloads", limit=limit, expand=EXPAND, **query.kwargs))
            except OfflineModeIsEnabled as err:
                raise HubUnreachable("offline mode is on (HF_HUB_OFFLINE=1)") from err
            except network_errors() as err:
                first_line = str(err).splitlines()[0] if str(err) else ""
                raise HubUnreachable(f"{type(err).__name__}: {first_line}") from err
            ids = [i.id for i in infos]
            with ThreadPoolExecutor(max_workers=CARD_WORKERS) as pool:  # READMEs, listings: I/O bound
                texts = pool.map(fetch_card_text, ids) if card_text else [None] * len(infos)
                facts = pool.map(fetch_facts, ids) if sizes else [None] * len(infos)
                for info, text, fact in zip(infos, texts, facts, strict=True):
                    on_model(task, info.id)
                    yield card_from_info(task, info, text, fact)


def other_tasks_lines(path: Path, tasks: Iterable[str]) -> list[str]:
    """The lines of an existing user catalog that a refresh of `tasks` must keep: entries of other
    tasks, and lines it cannot read (they are the user's to fix, not the refresh's to drop)."""
    refreshed = set(tasks)
    kept = []
    for line in Path(path).read_text(encoding="utf-8").splitlines() if Path(path).exists() else []:
        try:
            task = json.loads(line).get("task")
        except (ValueError, AttributeError):
            task = None
        if line.strip() and task not in refreshed:
            kept.append(line)
    return kept


def write_user_file(cards: Iterable[ModelCard], path: Path, *, keep: Iterable[str] = ()) -> int:
    """Write `keep` lines, then cards, as a user catalog (JSONL), atomically: nothing is left
    half-written on error. Returns the number of cards written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for line in keep:
            f.write(line + "\n")
        for card in cards:
            f.write(json.dumps(card.to_json(), ensure_ascii=False) + "\n")
            n += 1
    os.replace(tmp, path)
    return n


def default_tasks() -> list[str]:
    return [t for t in TASKS if hub_queries(t)]
