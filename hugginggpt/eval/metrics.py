"""Planning metrics: TaskBench's, the HuggingGPT paper's, and the run's own costs.

TaskBench (as its evaluate.py computes them, default "resource" mode):
- node F1: per sample, the *set* of tool names on each side; names outside the tool list are
  ignored on both sides (they count neither for nor against).
- edge F1: the set of (source tool, target tool) pairs built from "<node-k>" references (not from
  `task_links`); a node referring to itself is dropped.
- argument t-F1 / v-F1: sets of "tool-name" / "tool-name-value" strings. A literal argument's
  name is its content type (image/audio/video by file extension, else text); a "<node-k>"
  argument is named by the first output type of node k's tool, and its value is that tool's name.
- normalised edit distance: 1 - Levenshtein ratio of the two tool-id sequences in list order
  (ratio = 2·LCS / (len a + len b), the InDel ratio; an unknown name is id 0).
Upstream pools the counts of all samples (micro) and averages the edit distance over samples.
Every figure here comes both pooled and averaged per sample. A sample with nothing to count on
either side (e.g. edges of a one-node plan, predicted as one node) scores 1.0 per sample and adds
nothing to the pooled counts.

HuggingGPT paper: single-task accuracy (a one-tool gold, predicted as exactly that one task);
precision / recall / F1 over the *multiset* of task names (unknown names count as wrong); edit
distance between the task sequences in execution order (unit costs, over the longer length).

Where this module deliberately differs from upstream's evaluate.py:
- Tool names with underscores are normalised ("_" -> " ") at both ends of an edge. Upstream
  normalises the source (taken from its normalised name list) but keeps the target as written, so
  an edge into a tool written with underscores can never match.
- A "<node-k>" reference to a node the list does not have is read as a literal text argument.
  Upstream's lookup raises there, and its catch-all either repeats the previous argument or drops
  the whole sample.
- Edge F1 is None (shown "n/a") for a group with no edges on either side, e.g. the one-tool
  samples: upstream hands scikit-learn empty arrays there, which raises.
- An argument written as an object, {"name": ..., "value": ...} (TaskBench's other domains), is
  read by its value, on both sides. Upstream takes the object's first value, which is the name.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hugginggpt.eval.data import NODE_REF, SHAPES, GoldSample, Tool, argument_text

_EXTENSIONS = {
    "image": ("jpg", "png", "jpeg", "gif", "bmp", "tiff", "svg", "ico"),
    "audio": ("mp3", "wav", "wma", "ogg", "aac", "flac", "aiff", "au"),
    "video": ("mp4", "avi", "mov", "flv", "wmv", "mkv", "webm", "m4v", "mpg", "mpeg"),
}


@dataclass
class Counts:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, other: Counts) -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn

    @property
    def empty(self) -> bool:
        return self.tp + self.fp + self.fn == 0

    def precision(self) -> float | None:
        return None if self.empty else (self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0)

    def recall(self) -> float | None:
        return None if self.empty else (self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0)

    def f1(self) -> float | None:
        return None if self.empty else 2 * self.tp / (2 * self.tp + self.fp + self.fn)

    def sample_f1(self) -> float:
        """Per-sample F1: two empty sides agree perfectly."""
        f1 = self.f1()
        return 1.0 if f1 is None else f1  # None: both sides empty

    @classmethod
    def of_sets(cls, gold: set[Any], pred: set[Any]) -> Counts:
        return cls(tp=len(gold & pred), fp=len(pred - gold), fn=len(gold - pred))

    @classmethod
    def of_multisets(cls, gold: Counter[str], pred: Counter[str]) -> Counts:
        tp = sum((gold & pred).values())
        return cls(tp=tp, fp=sum(pred.values()) - tp, fn=sum(gold.values()) - tp)


@dataclass
class View:
    """One side of a sample as TaskBench scores it."""

    names: list[str]
    links: set[tuple[str, str]]
    arg_names: set[str]
    arg_values: set[str]
    refs: list[list[int]]  # per node, indexes of the nodes it uses


def content_type(argument: str) -> str:
    text = argument.strip("'")
    for kind, extensions in _EXTENSIONS.items():
        if any(f".{ext}" in text for ext in extensions):
            return kind
    return "text"


def _arguments(node: dict[str, Any]) -> list[str]:
    """A node's arguments as strings: objects give their value, lists are joined (data.argument_text)."""
    raw = node.get("arguments") or []
    return [argument_text(a) for a in (raw if isinstance(raw, list) else [raw])]


def view(nodes: Sequence[dict[str, Any]], tools: dict[str, Tool]) -> View:
    names = [str(n.get("task", "")).replace("_", " ") for n in nodes]
    links: set[tuple[str, str]] = set()
    arg_names: set[str] = set()
    arg_values: set[str] = set()
    refs: list[list[int]] = []
    for index, node in enumerate(nodes):
        used = []
        for argument in _arguments(node):
            match = NODE_REF.search(argument)
            k = int(match.group(1)) if match else None
            if k == index:
                continue
            if k is not None and k < len(names):
                source = names[k]
                links.add((source, names[index]))
                used.append(k)
                kind = tools[source].output_type if source in tools else "other"
                value = source
            else:
                kind, value = content_type(argument), argument
            arg_names.add(f"{names[index]}-{kind}")
            arg_values.add(f"{names[index]}-{kind}-{value}")
        refs.append(used)
    return View(names, links, arg_names, arg_values, refs)


def lcs_length(a: Sequence[Any], b: Sequence[Any]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        previous = 0
        for j, y in enumerate(b, 1):
            current = row[j]
            row[j] = previous + 1 if x == y else max(row[j], row[j - 1])
            previous = current
    return row[-1]


def levenshtein(a: Sequence[Any], b: Sequence[Any]) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            current = row[j]
            row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
            previous = current
    return row[-1]


def execution_order(names: Sequence[str], refs: Sequence[Sequence[int]]) -> list[str]:
    """Names in an order where every node follows the nodes it uses; ties by list position."""
    indegree = [len(set(r)) for r in refs]
    users: dict[int, list[int]] = {i: [] for i in range(len(names))}
    for node, sources in enumerate(refs):
        for source in set(sources):
            users[source].append(node)
    ready = [i for i, d in enumerate(indegree) if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for user in users[node]:
            indegree[user] -= 1
            if indegree[user] == 0:
                heapq.heappush(ready, user)
    order += [i for i in range(len(names)) if i not in order]  # a cycle: keep the rest in list order
    return [names[i] for i in order]


@dataclass
class RunStats:
    """What planning one request cost, from its prediction record."""

    recorded: bool = False  # a prediction record exists (False: never asked, or the backend failed)
    invalid: bool = False  # no valid plan came out (after retries)
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    names: int = 0  # task names the LLM wrote, over all attempts
    hallucinated: int = 0  # of those, names that are no task type of ours
    planned: int = 0  # tasks in the final plan
    outside_taskbench: int = 0  # of those, tasks TaskBench has no tool for


@dataclass
class SampleScore:
    id: str
    shape: str
    n_tools: int
    predicted: bool  # False: no prediction, scored as an empty plan
    node: Counts
    node_by_tool: dict[str, Counts]
    edge: Counts
    arg_name: Counts
    arg_value: Counts
    lcs2: int  # 2 * LCS of the tool-id sequences
    lengths: int  # len(gold) + len(pred)
    task: Counts  # multiset of names, the paper's P/R/F1
    seq_distance: int
    seq_length: int  # max(len(gold), len(pred))
    single_correct: bool | None  # None unless the gold is one task
    run: RunStats = field(default_factory=RunStats)

    @property
    def ned(self) -> float:
        return 1 - (self.lcs2 / self.lengths if self.lengths else 1.0)

    @property
    def seq_ed(self) -> float:
        return self.seq_distance / self.seq_length if self.seq_length else 0.0


def score_sample(
    gold: GoldSample,
    pred_nodes: Sequence[dict[str, Any]] | None,
    tools: dict[str, Tool],
    run: RunStats | None = None,
) -> SampleScore:
    """Score one prediction against its gold. `pred_nodes=None`: no prediction (an empty plan)."""
    g, p = view(gold.nodes, tools), view(pred_nodes or [], tools)
    known = set(tools)
    g_known, p_known = set(g.names) & known, set(p.names) & known
    by_tool = {name: Counts.of_sets({name} & g_known, {name} & p_known) for name in g_known | p_known}
    ids = {name: i + 1 for i, name in enumerate(tools)}
    g_ids, p_ids = [ids.get(n, 0) for n in g.names], [ids.get(n, 0) for n in p.names]
    g_seq, p_seq = execution_order(g.names, g.refs), execution_order(p.names, p.refs)
    return SampleScore(
        id=gold.id,
        shape=gold.shape,
        n_tools=gold.n_tools,
        predicted=pred_nodes is not None,
        node=Counts.of_sets(g_known, p_known),
        node_by_tool=by_tool,
        edge=Counts.of_sets(g.links, p.links),
        arg_name=Counts.of_sets(g.arg_names, p.arg_names),
        arg_value=Counts.of_sets(g.arg_values, p.arg_values),
        lcs2=2 * lcs_length(p_ids, g_ids),
        lengths=len(g_ids) + len(p_ids),
        task=Counts.of_multisets(Counter(g.names), Counter(p.names)),
        seq_distance=levenshtein(p_seq, g_seq),
        seq_length=max(len(g_seq), len(p_seq)),
        single_correct=(p.names == g.names) if len(g.names) == 1 else None,
        run=run or RunStats(),
    )


# (key, label, lower is better). The report shows them in this order.
METRICS: list[tuple[str, str, bool]] = [
    ("node_f1", "TaskBench node F1 (pooled)", False),
    ("node_f1_mean", "TaskBench node F1 (per-sample mean)", False),
    ("edge_f1", "TaskBench edge F1 (pooled)", False),
    ("edge_f1_mean", "TaskBench edge F1 (per-sample mean)", False),
    ("arg_t_f1", "TaskBench argument t-F1 (pooled)", False),
    ("arg_t_f1_mean", "TaskBench argument t-F1 (per-sample mean)", False),
    ("arg_v_f1", "TaskBench argument v-F1 (pooled)", False),
    ("arg_v_f1_mean", "TaskBench argument v-F1 (per-sample mean)", False),
    ("ned", "TaskBench normalised edit distance ↓ (per-sample mean, as upstream)", True),
    ("ned_pooled", "TaskBench normalised edit distance ↓ (pooled)", True),
    ("single_acc", "Paper: single-task accuracy", False),
    ("task_precision", "Paper: task precision (pooled)", False),
    ("task_recall", "Paper: task recall (pooled)", False),
    ("task_f1", "Paper: task F1 (pooled)", False),
    ("task_f1_mean", "Paper: task F1 (per-sample mean)", False),
    ("seq_ed", "Paper: edit distance ↓ (execution order, per-sample mean)", True),
    ("seq_ed_pooled", "Paper: edit distance ↓ (execution order, pooled)", True),
    ("invalid_share", "Share of invalid plans (no valid plan after retries)", True),
    ("hallucinated_share", "Share of hallucinated task names (all attempts)", True),
    ("outside_taskbench_share", "Share of planned tasks TaskBench has no tool for", True),
    ("retries_mean", "Self-correction retries per request", True),
    ("retried_share", "Share of requests that needed a retry", True),
    ("calls_mean", "LLM calls per request", True),
    ("prompt_tokens_mean", "Prompt tokens per request", True),
    ("completion_tokens_mean", "Completion tokens per request", True),
    ("seconds_mean", "Seconds per request", True),
]
LOWER_IS_BETTER = {key for key, _, lower in METRICS if lower}


def aggregate(scores: Sequence[SampleScore], tools: Iterable[str] = ()) -> dict[str, Any]:
    """Every metric over a group of samples; None where the group gives it nothing to measure."""
    n = len(scores)
    out: dict[str, Any] = {"samples": n, "predicted": sum(s.predicted for s in scores)}
    if n == 0:
        return out | {key: None for key, _, _ in METRICS}

    def pooled(attr: str) -> Counts:
        total = Counts()
        for s in scores:
            total.add(getattr(s, attr))
        return total

    def mean(values: Sequence[float]) -> float | None:
        return sum(values) / len(values) if values else None

    for attr, key in (("node", "node"), ("edge", "edge"), ("arg_name", "arg_t"), ("arg_value", "arg_v")):
        counts = pooled(attr)
        out[f"{key}_precision"] = counts.precision()
        out[f"{key}_recall"] = counts.recall()
        out[f"{key}_f1"] = counts.f1()
        out[f"{key}_f1_mean"] = mean([getattr(s, attr).sample_f1() for s in scores])
    out["node_macro_f1_upstream"] = _macro_f1(scores, list(tools))
    lengths = sum(s.lengths for s in scores)
    out["ned"] = mean([s.ned for s in scores])
    out["ned_pooled"] = 1 - sum(s.lcs2 for s in scores) / lengths if lengths else 0.0

    singles = [s.single_correct for s in scores if s.single_correct is not None]
    out["single_acc"] = mean([float(c) for c in singles])
    task = pooled("task")
    out["task_precision"], out["task_recall"], out["task_f1"] = task.precision(), task.recall(), task.f1()
    out["task_f1_mean"] = mean([s.task.sample_f1() for s in scores])
    out["seq_ed"] = mean([s.seq_ed for s in scores])
    seq_length = sum(s.seq_length for s in scores)
    out["seq_ed_pooled"] = sum(s.seq_distance for s in scores) / seq_length if seq_length else 0.0

    runs = [s.run for s in scores if s.run.recorded]
    out["recorded"] = len(runs)
    names = sum(r.names for r in runs)
    planned = sum(r.planned for r in runs)
    out["invalid_share"] = mean([float(r.invalid) for r in runs])
    out["hallucinated_share"] = sum(r.hallucinated for r in runs) / names if names else None
    out["outside_taskbench_share"] = sum(r.outside_taskbench for r in runs) / planned if planned else None
    out["retries_mean"] = mean([max(r.attempts - 1, 0) for r in runs])
    out["retried_share"] = mean([float(r.attempts > 1) for r in runs])
    out["calls_mean"] = mean([r.attempts for r in runs])
    out["prompt_tokens_mean"] = mean([r.prompt_tokens for r in runs])
    out["completion_tokens_mean"] = mean([r.completion_tokens for r in runs])
    out["seconds_mean"] = mean([r.seconds for r in runs])
    return out


def _macro_f1(scores: Sequence[SampleScore], tools: list[str]) -> float | None:
    """Upstream's macro node F1: the mean over every tool in the list, 0 for tools never seen."""
    if not tools:
        return None
    per_tool = {name: Counts() for name in tools}
    for s in scores:
        for name, counts in s.node_by_tool.items():
            per_tool[name].add(counts)
    return sum(c.f1() or 0.0 for c in per_tool.values()) / len(tools)


ANSWERED = "answered"  # upstream's view: only the samples that have a prediction


def groups(scores: Sequence[SampleScore]) -> dict[str, list[SampleScore]]:
    """overall; by shape (single, chain, dag); by number of gold tools ("tools=N"); then the same
    over the answered samples only, as upstream reports them ("answered", "answered:chain",
    "answered:tools=2", ...)."""
    out = _split(scores)
    answered = _split([s for s in scores if s.predicted])
    out[ANSWERED] = answered.pop("overall")
    out.update({f"{ANSWERED}:{name}": members for name, members in answered.items()})
    return out


def _split(scores: Sequence[SampleScore]) -> dict[str, list[SampleScore]]:
    out: dict[str, list[SampleScore]] = {"overall": list(scores)}
    shapes = [*SHAPES, *sorted({s.shape for s in scores} - set(SHAPES))]
    for shape in shapes:
        members = [s for s in scores if s.shape == shape]
        if members:
            out[shape] = members
    for count in sorted({s.n_tools for s in scores}):
        out[f"tools={count}"] = [s for s in scores if s.n_tools == count]
    return out


def evaluate_groups(scores: Sequence[SampleScore], tools: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
    tools = list(tools)
    return {name: aggregate(members, tools) for name, members in groups(scores).items()}


def format_value(key: str, value: Any) -> str:
    if value is None:
        return "n/a"
    if key.endswith("tokens_mean"):
        return f"{value:.0f}"
    if key in ("retries_mean", "calls_mean", "seconds_mean"):
        return f"{value:.2f}"
    return f"{value:.3f}"
