"""Score a run's predictions against the gold: per sample, then per group, into metrics.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hugginggpt.eval.convert import taskbench_to_plan
from hugginggpt.eval.data import Dataset, GoldSample
from hugginggpt.eval.harness import PREDICTIONS, RUN_INFO, predicted_nodes, read_predictions, run_stats
from hugginggpt.eval.metrics import SampleScore, evaluate_groups, score_sample
from hugginggpt.stages.planner import validate_unchecked_files

METRICS_FILE = "metrics.json"


def score_records(
    dataset: Dataset, samples: list[GoldSample], records: dict[str, dict[str, Any]]
) -> list[SampleScore]:
    """A sample without a record, or whose record has no valid plan, scores as an empty plan."""
    return [
        score_sample(s, predicted_nodes(records.get(s.id)), dataset.tools, run_stats(records.get(s.id)))
        for s in samples
    ]


def score_run(
    dataset: Dataset, samples: list[GoldSample], out: Path, *, label: str | None = None
) -> dict[str, Any]:
    """Score `out/predictions.jsonl`, write `out/metrics.json`, and return what was written."""
    records = read_predictions(out / PREDICTIONS)
    scores = score_records(dataset, samples, records)
    info = json.loads((out / RUN_INFO).read_text(encoding="utf-8")) if (out / RUN_INFO).is_file() else {}
    result = {
        "meta": {
            "label": label or run_label(info, out),
            "model": info.get("model"),
            "shots": info.get("shots"),
            "data": str(dataset.gold_path),
            "samples": len(samples),
            "with_record": sum(1 for s in samples if s.id in records),
            "missing_policy": "empty",  # a sample with no valid plan scores as an empty plan
            "gold_not_plannable": gold_not_plannable(dataset, samples),
        },
        "groups": evaluate_groups(scores, dataset.tools),
        "per_sample": [_sample_row(s) for s in scores],
    }
    (out / METRICS_FILE).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def gold_not_plannable(dataset: Dataset, samples: list[GoldSample]) -> list[dict[str, str]]:
    """Gold plans that our task table rejects once mapped: no LLM can get these right here."""
    found = []
    for sample in samples:
        plan = taskbench_to_plan(sample.nodes, dataset.tools)
        problems = validate_unchecked_files(plan)
        if problems:
            found.append({"id": sample.id, "problem": problems[0]})
    return found


def run_label(info: dict[str, Any], out: Path) -> str:
    if info.get("model"):
        shots = info.get("shots")
        return f"{info['model']}, {'all' if shots is None else shots} demos"
    return out.name


def _sample_row(s: SampleScore) -> dict[str, Any]:
    return {
        "id": s.id,
        "shape": s.shape,
        "n_tools": s.n_tools,
        "predicted": s.predicted,
        "node_f1": s.node.sample_f1(),
        "edge_f1": s.edge.sample_f1(),
        "arg_t_f1": s.arg_name.sample_f1(),
        "arg_v_f1": s.arg_value.sample_f1(),
        "ned": s.ned,
        "task_f1": s.task.sample_f1(),
        "seq_ed": s.seq_ed,
    }
