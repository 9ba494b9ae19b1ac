"""Tabular classification with scikit-learn models, as the Hub's skops repos store them.

Safe by default: a `.skops` file is loaded with skops, which rebuilds only trusted types (scikit-learn,
numpy, scipy) and runs no code from the file. Pickle and joblib files (older skops and AutoTrain repos)
can run arbitrary code when loaded, so they are refused unless HUGGINGGPT_TRUST_PICKLE=1.
Needs the `scikit-learn` and `skops` packages. Keras and other tabular formats are not served.
"""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models_local.handlers.base import Device, Handler, Outputs, RuntimeUnsupported

TRUSTED_PREFIXES = ("sklearn.", "numpy.", "scipy.", "builtins.", "collections.")
PICKLE_SUFFIXES = (".pkl", ".pickle", ".joblib")


@dataclass
class Table:
    model: Any
    columns: list[str] | None  # feature names in the order the model expects, when known


def _settings(folder: Path) -> dict[str, Any] | None:
    """The "sklearn" section of config.json (skops layout); None when the folder has no config.json."""
    config = folder / "config.json"
    if not config.is_file():
        return None
    return json.loads(config.read_text()).get("sklearn") or {}


def _model_file(folder: Path, settings: dict[str, Any] | None) -> Path:
    """The file named by config.json's sklearn.model.file (skops layout), else the only model file."""
    if settings is not None:
        name = settings.get("model", {}).get("file")
        if name and (folder / name).is_file():
            return folder / name
    found = sorted(p for p in folder.iterdir() if p.suffix in (".skops", *PICKLE_SUFFIXES))
    if not found:
        raise RuntimeUnsupported(f"no scikit-learn model file (.skops, .pkl, .joblib) in {folder}")
    return next((p for p in found if p.suffix == ".skops"), found[0])


def _load_skops(path: Path) -> Any:
    import skops.io as sio

    untrusted = sio.get_untrusted_types(file=path)
    unsafe = [t for t in untrusted if not t.startswith(TRUSTED_PREFIXES)]
    if unsafe:
        raise RuntimeUnsupported(f"{path.name} holds types outside scikit-learn/numpy/scipy: {unsafe[:5]}")
    return sio.load(path, trusted=untrusted)


def _load(source: str, device: Device) -> Table:
    folder = Path(source)
    settings = _settings(folder)
    path = _model_file(folder, settings)
    if path.suffix == ".skops":
        model = _load_skops(path)
    elif os.environ.get("HUGGINGGPT_TRUST_PICKLE") == "1":
        import joblib

        model = joblib.load(path)
    else:
        raise RuntimeUnsupported(
            f"{path.name} is a pickle, which can run code when loaded; "
            "set HUGGINGGPT_TRUST_PICKLE=1 to allow it"
        )
    if not hasattr(model, "predict"):
        raise RuntimeUnsupported(f"{path.name} holds a {type(model).__name__}, not a classifier")
    columns = settings.get("columns") if settings is not None else None
    if columns is None and hasattr(model, "feature_names_in_"):
        columns = [str(c) for c in model.feature_names_in_]
    return Table(model, columns)


def _number(value: str) -> Any:
    try:
        return float(value)
    except ValueError:
        return value.strip()


def parse_csv(text: str) -> tuple[list[str], list[list[Any]]]:
    """Header and rows of a CSV text (numbers as floats); blank lines are skipped."""
    rows = [r for r in csv.reader(io.StringIO(text.strip())) if any(cell.strip() for cell in r)]
    if len(rows) < 2:
        raise ValueError("tabular-classification needs CSV text: a header line and at least one row")
    header = [h.strip() for h in rows[0]]
    return header, [[_number(cell) for cell in row] for row in rows[1:]]


def _frame(table: Table, header: list[str], rows: list[list[Any]]) -> Any:
    columns = table.columns or header
    missing = [c for c in columns if c not in header]
    if table.columns and missing:
        raise ValueError(f"the table lacks the model's columns {missing}; it has {header}")
    index = [header.index(c) for c in columns] if table.columns else list(range(len(header)))
    picked = [[row[i] for i in index] for row in rows]
    try:
        import pandas as pd
    except ImportError:  # plain arrays work for models fitted without column names
        import numpy as np

        return np.array(picked, dtype=object if any(isinstance(v, str) for r in picked for v in r) else float)
    return pd.DataFrame(picked, columns=columns)


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _classify(table: Table, inputs: dict[str, str], out: Outputs) -> None:
    header, rows = parse_csv(inputs["text"])
    frame = _frame(table, header, rows)
    labels = table.model.predict(frame)
    probabilities = table.model.predict_proba(frame) if hasattr(table.model, "predict_proba") else None
    results = []
    for i, label in enumerate(labels):
        item: dict[str, Any] = {"row": i + 1, "label": _plain(label)}
        if probabilities is not None:
            classes = [_plain(c) for c in table.model.classes_]
            scores = {str(c): round(float(p), 4) for c, p in zip(classes, probabilities[i], strict=True)}
            item["score"] = scores[str(item["label"])]
            item["scores"] = scores
        results.append(item)
    out.text(
        "; ".join(
            f"row {r['row']}: {r['label']}" + (f" ({r['score']:.2f})" if "score" in r else "")
            for r in results
        )
    )
    out.data(results)


HANDLERS: dict[str, Handler] = {
    "tabular-classification": Handler(_load, _classify, library="sklearn"),
}
