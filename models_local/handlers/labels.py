"""A classifier head's logits as scored labels (text and audio classification)."""

from __future__ import annotations

from typing import Any

from models_local.handlers.base import Outputs

TOP_K = 5  # labels reported by classifiers


def scored_labels(logits: Any, config: Any, *, top_k: int = TOP_K) -> list[dict]:
    """[{label, score}] best first: softmax, or sigmoid for multi-label heads."""
    import torch

    logits = logits.float()
    multi = getattr(config, "problem_type", None) == "multi_label_classification"
    scores = torch.sigmoid(logits) if multi else torch.softmax(logits, dim=-1)
    best = torch.argsort(scores, descending=True)[:top_k]
    names = getattr(config, "id2label", None) or {}
    return [
        {"label": str(names.get(int(i), f"LABEL_{int(i)}")), "score": round(float(scores[i]), 4)}
        for i in best
    ]


def write_labels(out: Outputs, logits: Any, config: Any) -> None:
    """A classifier's result: the top labels as text, and all of them with scores as data."""
    labels = scored_labels(logits, config)
    out.text(", ".join(f"{item['label']} ({item['score']:.2f})" for item in labels[:3]))
    out.data(labels)
