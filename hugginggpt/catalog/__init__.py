"""The model catalog: which models can do which task, ranked for selection.

Interface used by the rest of the controller: `ModelCard`, `Catalog.candidates()`, `load_catalog()`,
`prompt_lines()` (candidates rendered for the selection prompt within a token budget).
"""

from hugginggpt.catalog.card import ModelCard
from hugginggpt.catalog.model_catalog import Catalog, load_catalog
from hugginggpt.catalog.prompt import prompt_lines

__all__ = ["Catalog", "ModelCard", "load_catalog", "prompt_lines"]
