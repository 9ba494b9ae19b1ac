"""All task handlers, merged from the family modules (task name -> Handler)."""

from __future__ import annotations

from models_local.handlers import audio, controlnet, diffusion, multimodal, tabular, text, vision
from models_local.handlers.base import Device, Handler, Outputs

HANDLERS: dict[str, Handler] = {}
for _family in (text, audio, tabular, vision, multimodal, diffusion, controlnet):
    HANDLERS.update(_family.HANDLERS)

__all__ = ["HANDLERS", "Device", "Handler", "Outputs"]
