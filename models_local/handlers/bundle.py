"""A loaded transformers model with its processor, and how inputs reach it (text and audio handlers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from models_local.handlers.base import Device


@dataclass
class Bundle:
    """A loaded model with what it needs to turn inputs into tensors."""

    model: Any
    processor: Any  # a tokenizer, feature extractor or processor
    device: Device
    extra: Any = None  # per-task extras (a vocoder, a pipeline, pooling settings, ...)


def load_model(auto_class: str, folder: str, device: Device) -> Any:
    """`transformers.<auto_class>.from_pretrained` in the device dtype, moved to the device, eval mode."""
    import transformers

    cls = getattr(transformers, auto_class)
    model = cls.from_pretrained(folder, dtype=device.dtype)
    return model.to(device.name).eval()


def tensors_to(batch: Any, device: Device) -> dict[str, Any]:
    """A processor's tensors onto the device; floating ones (pixels, audio) in the device dtype, which
    the loaders give the model, token ids untouched. Non-tensor entries are left out."""
    return {
        k: v.to(device.name, dtype=device.dtype) if v.is_floating_point() else v.to(device.name)
        for k, v in batch.items()
        if hasattr(v, "is_floating_point")
    }
