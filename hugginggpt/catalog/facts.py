"""A model's size and licence from the Hub: what `catalog refresh` stores on each card, and what a
card without them gets on first use (kept in the work folder by estimate.FactBook).

The size is the total of the weight files the local runtime would download (models_local's own
choice of files: safetensors over pickles, no other frameworks' exports), from one
`HfApi.model_info(files_metadata=True)` request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Facts:
    size_bytes: int | None
    license: str | None


def facts_from_info(info: Any) -> Facts:
    """Facts from a ModelInfo asked with files_metadata=True (siblings with sizes, card data)."""
    from models_local.footprint import listed  # the runtime's rule for what it downloads

    files = {s.rfilename: int(s.size or 0) for s in getattr(info, "siblings", None) or [] if s.rfilename}
    size = listed(files).weights_bytes or None if files else None
    data = info.card_data.to_dict() if getattr(info, "card_data", None) is not None else {}
    licence = data.get("license")
    if isinstance(licence, list):
        licence = licence[0] if licence else None
    return Facts(size, str(licence).strip() or None if licence else None)


def hub_facts(model_id: str, *, timeout: float = 10.0) -> Facts:
    """Raises what huggingface_hub raises: offline mode, a missing repo, no network."""
    from huggingface_hub import HfApi

    return facts_from_info(HfApi().model_info(model_id, files_metadata=True, timeout=timeout))
