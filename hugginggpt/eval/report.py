"""The report of a run (markdown + PNG bar charts) and runs compared side by side."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hugginggpt.eval.data import SHAPES
from hugginggpt.eval.metrics import ANSWERED, LOWER_IS_BETTER, METRICS, format_value
from hugginggpt.eval.score import METRICS_FILE

SHAPE_GROUPS = ("overall", *SHAPES)
# What the charts show: the headline figure of each family.
CHART_METRICS = [
    ("node_f1", "node F1"),
    ("edge_f1", "edge F1"),
    ("arg_t_f1", "arg t-F1"),
    ("arg_v_f1", "arg v-F1"),
    ("ned", "norm. ED ↓"),
    ("single_acc", "single acc."),
    ("task_f1", "task F1"),
    ("seq_ed", "seq. ED ↓"),
    ("invalid_share", "invalid ↓"),
]

NOTES = """\
- TaskBench figures follow its `evaluate.py`: node F1 on the set of tool names (names outside the
  tool list are ignored on both sides), edge F1 on (source, target) pairs from `<node-k>`
  references, argument t-F1 / v-F1 on "tool-type" / "tool-type-value" strings, normalised edit
  distance = 1 − InDel ratio of the tool sequences in list order. *Pooled* sums the counts of all
  samples (as upstream); *per-sample mean* averages each sample's figure (a sample with nothing to
  count on either side scores 1.0).
- Paper figures (HuggingGPT): single-task accuracy over one-tool requests (exactly that one task
  predicted); precision/recall/F1 over the multiset of task names (unknown names count as wrong);
  edit distance of the task sequences in execution order, over the longer length.
- **Missing predictions** (no valid plan after the self-correction retries, or never answered)
  **score as an empty plan.** Upstream drops them instead: the *answered* column, and the
  answered-only tables by shape and by number of tools, show that view.
- Plans are written with the project's task types and mapped to TaskBench's tool names
  (`hugginggpt/eval/mapping.py`); image-to-image with a text prompt is "Image Editing".
- The planner sees the project's prompt and demos, not TaskBench's; media files a request mentions
  (example.jpg) are listed as its uploads (`--no-files` turns that off).
- Groups: shape = the sample's `type` (how TaskBench sampled it); tools = number of gold nodes.
"""


def write_report(result: dict[str, Any], out: Path) -> Path:
    """report.md and its charts in `out`, from what `score_run` returned."""
    meta, table = result["meta"], result["groups"]
    shapes = [g for g in (*SHAPE_GROUPS, "answered") if g in table]
    by_tools = sorted((g for g in table if g.startswith("tools=")), key=lambda g: int(g.split("=")[1]))
    charts = []
    if plot_groups(
        table,
        [g for g in SHAPE_GROUPS if g in table],
        out / "metrics_by_shape.png",
        title=f"{meta['label']}: by task shape",
    ):
        charts.append("metrics_by_shape.png")
    if by_tools and plot_groups(
        table, by_tools, out / "metrics_by_tools.png", title=f"{meta['label']}: by number of tools"
    ):
        charts.append("metrics_by_tools.png")
    lines = [
        f"# Planning evaluation: {meta['label']}",
        "",
        (
            f"Data: `{meta['data']}`; {meta['samples']} samples, "
            f"{meta['with_record']} with a prediction record, "
            f"{table['overall']['predicted']} with a valid plan; "
            f"{meta['samples'] - table['overall']['predicted']} scored as an empty plan (missing prediction)."
        ),
        "",
        *_not_plannable(meta),
        "## By task shape",
        "",
        *metric_table(table, shapes),
        "",
    ]
    if by_tools:
        lines += ["## By number of tools", "", *metric_table(table, by_tools), ""]
    answered = [g for g in table if g.startswith(f"{ANSWERED}:")]
    answered_shapes = [ANSWERED, *(g for g in answered if not g.startswith(f"{ANSWERED}:tools="))]
    answered_tools = sorted(
        (g for g in answered if g.startswith(f"{ANSWERED}:tools=")), key=lambda g: int(g.split("=")[1])
    )
    if answered:
        lines += ["## Answered samples only (as upstream reports)", ""]
        lines += [*metric_table(table, answered_shapes), ""]
        if answered_tools:
            lines += [*metric_table(table, answered_tools), ""]
    lines += [f"![{c}]({c})" for c in charts]
    lines += ["", "## How to read it", "", NOTES]
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _not_plannable(meta: dict[str, Any]) -> list[str]:
    found = meta.get("gold_not_plannable") or []
    if not found:
        return []
    first = found[0]
    line = (
        f"{len(found)} of {meta['samples']} gold plans break this project's task table once mapped, so no "
        f"plan can match them here; first: {first['id']}: {first['problem']}"
    )
    return [line, ""]


def metric_table(
    table: dict[str, dict[str, Any]],
    columns: Sequence[str],
    *,
    bold_best: bool = False,
) -> list[str]:
    rows = [
        "| metric | " + " | ".join(columns) + " |",
        "| --- |" + " ---: |" * len(columns),
        "| samples | " + " | ".join(str(table[c]["samples"]) for c in columns) + " |",
        "| with a valid plan | " + " | ".join(str(table[c]["predicted"]) for c in columns) + " |",
    ]
    for key, label, _ in METRICS:
        values = [table[c].get(key) for c in columns]
        cells = [format_value(key, v) for v in values]
        if bold_best:
            cells = _bold_best(key, values, cells)
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return rows


def _bold_best(key: str, values: list[Any], cells: list[str]) -> list[str]:
    present = [v for v in values if v is not None]
    if len(present) < 2 or len(set(present)) == 1:
        return cells
    best = min(present) if key in LOWER_IS_BETTER else max(present)
    return [f"**{c}**" if v == best else c for v, c in zip(values, cells, strict=True)]


def plot_groups(
    table: dict[str, dict[str, Any]],
    series: Sequence[str],
    path: Path,
    *,
    title: str,
) -> bool:
    """Grouped bars: one cluster per metric, one bar per series. False when there is nothing to draw."""
    metrics = [(k, name) for k, name in CHART_METRICS if any(table[s].get(k) is not None for s in series)]
    if not metrics or not series:
        return False
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(min(16.0, max(7.0, 0.3 * len(metrics) * len(series) + 2)), 4.8))
    for i, group in enumerate(series):
        xs = [m + (i - (len(series) - 1) / 2) * width for m in range(len(metrics))]
        ys = [_or_nan(table[group].get(k)) for k, _ in metrics]  # no bar where there is no figure
        ax.bar(xs, ys, width=width, label=group)
    ax.set_xticks(range(len(metrics)), [name for _, name in metrics], rotation=20, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("score (↓: lower is better)")
    ax.set_title(title)
    ax.legend(fontsize="small", ncols=min(6, len(series)), loc="upper center", bbox_to_anchor=(0.5, -0.22))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else value


def compare_runs(run_dirs: Sequence[Path], out: Path) -> Path:
    """compare.md and one chart per shape, the runs side by side, the best figure in bold."""
    results = [json.loads((Path(d) / METRICS_FILE).read_text(encoding="utf-8")) for d in run_dirs]
    labels = [r["meta"]["label"] for r in results]
    if len(set(labels)) < len(labels):
        labels = [f"{label} ({Path(d).name})" for label, d in zip(labels, run_dirs, strict=True)]
    out.mkdir(parents=True, exist_ok=True)
    lines = ["# Planning runs compared", ""]
    for label, d, r in zip(labels, run_dirs, results, strict=True):
        lines.append(f"- **{label}**: `{d}`, {r['meta']['samples']} samples, data `{r['meta']['data']}`")
    if len({r["meta"]["data"] for r in results}) > 1 or len({r["meta"]["samples"] for r in results}) > 1:
        lines += [
            "",
            "**Warning: the runs were scored on different data; their figures are not comparable.**",
        ]
    for group in (*SHAPE_GROUPS, "answered"):
        if not all(group in r["groups"] for r in results):
            continue
        # One table whose columns are the runs: key each run's figures by its label.
        table = {label: r["groups"][group] for label, r in zip(labels, results, strict=True)}
        lines += ["", f"## {group}", "", *metric_table(table, labels, bold_best=True)]
        if group != "answered" and plot_groups(
            table, labels, out / f"compare_{group}.png", title=f"{group}: runs compared"
        ):
            lines += ["", f"![compare_{group}](compare_{group}.png)"]
    lines += ["", "## How to read it", "", NOTES]
    path = out / "compare.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
