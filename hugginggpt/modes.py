"""The inference modes, written once: which backends each mode tries, in order.

The settings validate against it, the CLI and the app offer its names, and the router builds
its backend list from it.
"""

from __future__ import annotations

# mode -> (backends in the order they are tried, a line for people)
INFERENCE_MODES: dict[str, tuple[tuple[str, ...], str]] = {
    "local": (("local",), "in this process (transformers, diffusers)"),
    "hosted": (("hosted",), "Hugging Face inference (providers or a model's own endpoint)"),
    "hybrid": (
        ("remote", "local", "hosted"),
        "the expert server first (with experts_url), then this process, then hosted, when one cannot "
        "run the model or fails",
    ),
    "remote": (
        ("remote",),
        "on the expert server at experts_url (Ray Serve or python -m models_local.serve)",
    ),
}


def backends_of(mode: str) -> tuple[str, ...]:
    """The backend names `mode` tries, in order; ValueError for an unknown mode."""
    if mode not in INFERENCE_MODES:
        raise ValueError(f"unknown inference mode {mode!r}: use one of {', '.join(INFERENCE_MODES)}")
    return INFERENCE_MODES[mode][0]
