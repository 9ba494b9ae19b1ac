"""Catalog at scale: 1,000,000 synthetic models in the shipped-catalog format.

    python bench/catalog_scale.py [--n 1000000] [--k 5] [--eager]

Prints: time to write the indexed file, time and memory to open it (what every CLI run pays),
top-K query times (cold: first query of a task; warm: again; with a selective `runnable`), the
same with a user overlay, and with --eager the cost of parsing everything up front, for comparison.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hugginggpt.catalog import Catalog, ModelCard, load_catalog
from hugginggpt.catalog.indexed_file import write_ranked
from hugginggpt.catalog.model_catalog import SHIPPED
from hugginggpt.tasks import TASKS

WORDS = [
    "vision",
    "speech",
    "text",
    "image",
    "audio",
    "small",
    "large",
    "base",
    "tiny",
    "fine",
    "tuned",
    "multilingual",
    "fast",
    "robust",
]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def synthetic(task: str, n: int, rng: random.Random, offset: int):
    """n ranked cards for one task: a long-tailed download distribution like the Hub's."""
    counts = sorted(((int(rng.paretovariate(1.2) * 10), rng.randrange(100)) for _ in range(n)), reverse=True)
    for i, (downloads, likes) in enumerate(counts):
        words = rng.sample(WORDS, 4)
        yield ModelCard(
            id=f"org{(offset + i) % 5000}/{'-'.join(words[:2])}-{offset + i}",
            task=task,
            downloads=downloads,
            likes=likes,
            library=rng.choice(["transformers", "diffusers", "keras"]),
            local=rng.random() < 0.5,
            license="apache-2.0",
            languages=("en",),
            tags=tuple(words[2:]),
            description=f"A synthetic {' '.join(words)} model to {TASKS[task].description}.",
        )


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--eager", action="store_true", help="also time parsing every row up front")
    args = parser.parse_args()
    rng = random.Random(0)
    tasks = list(TASKS)
    per_task = args.n // len(tasks)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        t = time.perf_counter()
        groups = ((task, synthetic(task, per_task, rng, i * per_task)) for i, task in enumerate(tasks))
        count = write_ranked(groups, path)
        write_s = time.perf_counter() - t
        size_mb = path.stat().st_size / 2**20
        print(
            f"entries: {count:,} over {len(tasks)} tasks ({per_task:,} per task), file {size_mb:.0f} MiB, "
            f"written in {write_s:.1f} s"
        )

        gc.collect()
        before = rss_mb()
        open_s, catalog = timed(lambda: load_catalog([], shipped=path))
        print(f"open (load_catalog): {open_s * 1000:.2f} ms, RSS +{rss_mb() - before:.1f} MiB")
        shipped_s, _ = timed(lambda: load_catalog([], shipped=SHIPPED), repeat=5)
        print(
            f"open the real shipped catalog ({len(load_catalog([], shipped=SHIPPED))} models): "
            f"{shipped_s * 1000:.2f} ms"
        )

        def query_times(cat: Catalog, runnable=None) -> tuple[list[float], list[float]]:
            cold, warm = [], []
            for task in tasks:
                for bucket in (cold, warm):
                    t = time.perf_counter()
                    top = cat.candidates(task, k=args.k, runnable=runnable)
                    bucket.append((time.perf_counter() - t) * 1000)
                    assert len(top) == args.k and all(a.rank_key <= b.rank_key for a, b in pairwise(top))
            return cold, warm

        def report(label: str, times: tuple[list[float], list[float]]) -> None:
            cold, warm = times
            print(
                f"top-{args.k} {label:34} cold median {statistics.median(cold):.3f} ms, "
                f"max {max(cold):.3f} ms; warm median {statistics.median(warm):.3f} ms, "
                f"max {max(warm):.3f} ms"
            )

        report("any model", query_times(catalog))
        catalog = load_catalog([], shipped=path)
        report("runnable = local (about 50%)", query_times(catalog, lambda c: c.local))
        catalog = load_catalog([], shipped=path)
        report("runnable = 1 in 100 ids", query_times(catalog, lambda c: hash(c.id) % 100 == 0))
        print(f"RSS after all queries: +{rss_mb() - before:.1f} MiB")

        user = Path(tmp) / "user.jsonl"
        with open(user, "w") as f:
            for i in range(1000):
                task = tasks[i % len(tasks)]
                f.write(
                    json.dumps(
                        {
                            "id": f"user/model-{i}",
                            "task": task,
                            "downloads": rng.randrange(10**6),
                            "library": "transformers",
                        }
                    )
                    + "\n"
                )
        overlay_s, catalog = timed(lambda: load_catalog([user], shipped=path))
        print(f"open with a 1,000-entry user file: {overlay_s * 1000:.1f} ms")
        report("with the user overlay", query_times(catalog))

        if args.eager:
            gc.collect()
            before = rss_mb()
            t = time.perf_counter()
            with open(path, encoding="utf-8") as f:
                f.readline()
                cards = [ModelCard.from_json(json.loads(line)) for line in f]
            eager = Catalog(cards)
            top = eager.candidates(tasks[0], k=args.k)
            print(
                f"eager alternative (parse all, then sort): {time.perf_counter() - t:.1f} s, "
                f"RSS +{rss_mb() - before:.0f} MiB (top-{args.k} then {len(top)} models)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
