"""`catalog check`: what the Hub says now about models, and whether the local runtime could run them.

Per model: whether it still exists, whether it is gated, which inference providers serve it (and
whether live), and the local rule's verdict (rules.is_local on the Hub's library, else the card's).
One `HfApi.model_info` request per model id, a few at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hugginggpt.catalog.card import ModelCard, ProviderRoute
from hugginggpt.catalog.hub import HubUnreachable, network_errors, provider_routes
from hugginggpt.catalog.rules import is_local

if TYPE_CHECKING:
    from huggingface_hub.hf_api import ExpandModelProperty_T

CHECK_EXPAND: list[ExpandModelProperty_T] = [
    "gated",
    "inferenceProviderMapping",
    "library_name",
    "pipeline_tag",
    "siblings",  # the repo's files: a pipeline has its config (not_a_pipeline)
]
WORKERS = 8


@dataclass(frozen=True)
class Wanted:
    """A model to check: its id, the task it is listed for (None: take the Hub's), its card if any."""

    id: str
    task: str | None = None
    card: ModelCard | None = None


@dataclass(frozen=True)
class Checked:
    id: str
    task: str | None
    in_catalog: bool
    exists: bool | None  # None: the Hub's answer was an error (see `error`)
    gated: str | bool | None = None  # "auto" | "manual" | False; None: not known
    providers: tuple[ProviderRoute, ...] = ()
    library: str | None = None
    local: bool = False  # the local rule: the runtime's library and a task it serves
    error: str | None = None
    not_on_hub: str | None = None  # what it is instead (a local folder, built in): the Hub is not asked
    hub_task: str | None = None  # the Hub's pipeline tag: another task than `task` is worth a look
    not_a_pipeline: str | None = None  # why the repo cannot be loaded as its library's pipeline

    @property
    def live(self) -> list[str]:
        return [r.provider for r in self.providers if r.live]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task,
            "in_catalog": self.in_catalog,
            "exists": self.exists,
            "gated": self.gated,
            "providers": [
                {"provider": r.provider, "status": r.status, "task": r.task} for r in self.providers
            ],
            "live_providers": self.live,
            "library": self.library,
            "local": self.local,
            "error": self.error,
            "not_on_hub": self.not_on_hub,
            "hub_task": self.hub_task,
            "not_a_pipeline": self.not_a_pipeline,
        }

    def line(self) -> str:
        head = f"{self.task or '?':30} {self.id}"
        if self.exists is None:
            return f"{head}: could not check ({self.error})"
        if not self.exists:
            return f"{head}: MISSING (not on the Hub, or private)"
        if self.not_on_hub:
            return f"{head}: {self.not_on_hub}, not a Hub model; local: {'yes' if self.local else 'no'}"
        gated = f"gated ({self.gated})" if self.gated else "not gated"
        served = ", ".join(f"{r.provider} ({r.status}, {r.task})" for r in self.providers) or "none"
        local = "yes" if self.local else "no"
        other = self.hub_task and self.task and self.hub_task != self.task
        tagged = f"; the Hub tags it {self.hub_task}: does it do {self.task}?" if other else ""
        broken = f"; NOT A PIPELINE: {self.not_a_pipeline}" if self.not_a_pipeline else ""
        return f"{head}: exists, {gated}; providers: {served}; local: {local}{tagged}{broken}"


def check_models(wanted: Iterable[Wanted]) -> list[Checked]:
    """One result per wanted model, in order. Raises HubUnreachable when the Hub cannot be reached."""
    wanted = list(wanted)
    ids = list(dict.fromkeys(w.id for w in wanted if _not_on_hub(w.card) is None))
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        answers = dict(zip(ids, pool.map(_ask, ids), strict=True))
    return [_result(w, answers[w.id]) if w.id in answers else _local_only(w) for w in wanted]


def _not_on_hub(card: ModelCard | None) -> str | None:
    if card is not None and card.path:
        return f"a local folder ({card.path})"
    if card is not None and card.library == "builtin":
        return "built into the local runtime (no weights)"
    return None


def _local_only(wanted: Wanted) -> Checked:
    card = wanted.card
    assert card is not None  # only cards are local-only
    return Checked(
        card.id,
        card.task,
        True,
        exists=True,
        library=card.library,
        local=card.local,
        not_on_hub=_not_on_hub(card),
    )


def _ask(model_id: str) -> Any:
    """The Hub's ModelInfo, or the error it answered with (missing models are an answer too)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        return HfApi().model_info(model_id, expand=CHECK_EXPAND, timeout=30)
    except OfflineModeIsEnabled as err:
        raise HubUnreachable("offline mode is on (HF_HUB_OFFLINE=1)") from err
    except (HfHubHTTPError, ValueError) as err:  # the Hub answered: missing, refused, a malformed id
        return err
    except network_errors() as err:
        first_line = str(err).splitlines()[0] if str(err) else ""
        raise HubUnreachable(f"{type(err).__name__}: {first_line}") from err


def _result(wanted: Wanted, answer: Any) -> Checked:
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    card = wanted.card
    task = wanted.task
    if isinstance(answer, RepositoryNotFoundError):  # GatedRepoError is one too; model_info never raises it
        return Checked(
            wanted.id, task, card is not None, exists=False, library=card.library if card else None
        )
    if isinstance(answer, Exception):
        response = answer.response if isinstance(answer, HfHubHTTPError) else None
        first_line = (str(answer).splitlines() or [""])[0]
        reason = (
            f"HTTP {response.status_code}"
            if response is not None
            else f"{type(answer).__name__}: {first_line}"
        )
        return Checked(wanted.id, task, card is not None, exists=None, error=reason)
    task = task or answer.pipeline_tag
    library = answer.library_name or (card.library if card else None)
    local = bool(task and is_local(task, library))
    return Checked(
        wanted.id,
        task,
        card is not None,
        exists=True,
        gated=answer.gated,
        providers=provider_routes(answer) or (),
        library=library,
        local=local,
        hub_task=answer.pipeline_tag,
        not_a_pipeline=not_a_pipeline(library, answer.siblings),
    )


# The file each library's pipeline loads first: a repo without it (a VAE or a single checkpoint
# listed as text-to-image) cannot be run as a pipeline for its task.
PIPELINE_CONFIG = {"diffusers": "model_index.json", "transformers": "config.json"}


def not_a_pipeline(library: str | None, siblings: Any) -> str | None:
    """Why a repo with these files is no pipeline of `library`; None when it is, or not known."""
    needed = PIPELINE_CONFIG.get(library or "")
    if needed is None or siblings is None:
        return None
    files = {getattr(s, "rfilename", None) for s in siblings}
    if needed in files:
        return None
    return f"no {needed} (a checkpoint, not a {library} pipeline for its task)"
