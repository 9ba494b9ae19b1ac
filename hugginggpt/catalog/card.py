"""One model in the catalog: facts about it and a short description in our own words."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hugginggpt.catalog.tools import ToolRef, parse_tool


@dataclass(frozen=True)
class ProviderRoute:
    """One inference provider's entry in a model's Hub mapping (`inferenceProviderMapping`)."""

    provider: str  # e.g. "hf-inference", "fal-ai"
    status: str  # "live", "staging" (testing only) or "error" (its last health check failed)
    task: str  # the task the provider serves the model for, in huggingface_hub's words
    price_usd: float | None = None  # one call's price, where the catalog entry gives it

    @property
    def live(self) -> bool:
        return self.status == "live"


@dataclass(frozen=True)
class ModelCard:
    id: str  # hub id, or a name for a local folder / custom endpoint
    task: str
    downloads: int = 0
    likes: int = 0
    description: str = ""
    library: str | None = None  # transformers | diffusers | ...
    local: bool = False  # the local runtime can run it
    path: str | None = None  # a local folder to load instead of the hub id
    endpoint_url: str | None = None  # its own inference server
    size_bytes: int | None = None
    license: str | None = None
    languages: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    tags: tuple[str, ...] = field(default=())
    # False when downloads/likes are not known (curated entries): shown as "n/a", ranked as 0.
    counts_known: bool = True
    # Which inference providers serve it, from the Hub (`catalog refresh`, or a user entry).
    # None: not known (the shipped catalog, most user entries); (): the Hub lists none.
    providers: tuple[ProviderRoute, ...] | None = None
    # A Gradio Space's endpoint or an MCP tool (catalog/tools.py) instead of a model; id is the entry's.
    tool: ToolRef | None = None

    @property
    def source(self) -> str:
        """What to load: the local folder when there is one, else the hub id."""
        return self.path or self.id

    @property
    def rank_key(self) -> tuple[int, int]:
        """Most downloaded first, then most liked; ties keep the order they were listed in."""
        return (-self.downloads, -self.likes)

    def to_json(self) -> dict[str, Any]:
        raw = {k: v for k, v in asdict(self).items() if v not in (None, (), "") or k == "providers"}
        if self.tool is not None:
            raw["tool"] = self.tool.to_json()
        if raw["providers"] is None:
            del raw["providers"]  # unknown; an empty list says "no provider" and stays
        else:  # a price only where one is known
            raw["providers"] = tuple({k: v for k, v in r.items() if v is not None} for r in raw["providers"])
        if raw.get("counts_known") is True:
            del raw["counts_known"]  # the default: keep files short
        if raw.get("local") is False:
            del raw["local"]
        return raw

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ModelCard:
        known = cls.__dataclass_fields__
        values: dict[str, Any] = {
            k: (tuple(v) if isinstance(v, list) else v) for k, v in raw.items() if k in known
        }
        if values.get("providers") is not None:
            values["providers"] = tuple(
                r if isinstance(r, ProviderRoute) else ProviderRoute(**r) for r in values["providers"]
            )
        if isinstance(values.get("tool"), dict):
            values["tool"], problem = parse_tool(values["tool"])
            if problem:
                raise ValueError(problem)
        return cls(**values)
