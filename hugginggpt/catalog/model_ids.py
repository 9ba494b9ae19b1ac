"""What a model id may be when it comes from anything but the operator's own configuration.

Plan files, traces, the review form, user catalogs, MCP tools and the LLM's selection reply all name
models. Such a name is either a model the operator's catalog lists for the task (which may load a
folder or call an endpoint URL the operator set up), or a Hugging Face repo id by the Hub's own
rules (`owner/name` or `name`, ASCII). Anything else, a URL or a path above all, is refused here,
before any connection: an id that is a URL would send the picture, and once the HF token, to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from hugginggpt.catalog.card import ModelCard
from hugginggpt.text import shorten


class Cards(Protocol):
    """Where named models are looked up: a catalog.Catalog."""

    def get(self, model_id: str, task: str) -> ModelCard | None: ...


class ModelIdRefused(ValueError):
    """A model id that names no Hub model and no model of the catalog; the message says why."""


def hub_id_problem(model_id: str) -> str | None:
    """Why `model_id` is not a Hugging Face repo id; None when it is one."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if not model_id.isascii():
        return "only ASCII letters, digits, '-', '_' and '.' are allowed"
    try:
        validate_repo_id(model_id)
    except HFValidationError as e:
        return str(e).split(":")[0]  # the rule, without the id echoed back
    return None


def check_hub_id(model_id: str) -> None:
    problem = hub_id_problem(model_id)
    if problem is not None:
        raise ModelIdRefused(
            f"{shorten(repr(model_id), 120)} is not a Hugging Face model id (owner/name): {problem}"
        )


def named_model(model_id: str, task: str, catalog: Cards) -> ModelCard:
    """The card for a model somebody named: the catalog's, else a Hub id's (ModelIdRefused if neither)."""
    card = catalog.get(model_id, task)
    if card is not None:
        return card
    check_hub_id(model_id)
    if Path(model_id).exists():  # transformers would load the folder of that name here instead
        raise ModelIdRefused(f"{model_id!r} names a folder on this machine that the catalog does not list")
    return ModelCard(id=model_id, task=task)
