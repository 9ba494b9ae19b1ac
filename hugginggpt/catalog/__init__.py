"""The model catalog: which models can do which task, ranked for selection.

Interface used by the rest of the controller: `ModelCard`, `Catalog.candidates()`, `load_catalog()`.
"""

from .card import ModelCard
from .store import Catalog, load_catalog

__all__ = ["Catalog", "ModelCard", "load_catalog"]
