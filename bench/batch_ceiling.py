"""What batching can give at most on this machine: a model's own batch of n against n calls one
after another, in this process (no server, no HTTP), through the handlers the runtime calls.

    python bench/batch_ceiling.py [--n 8] [--threads 1,2] [--repeat 3]

For each task (tiny text-to-image at 10 steps, image classification, captioning) and torch thread
count: the median time of n single calls one by one, of one batch of n, and their ratio. The
ratio is the ceiling of what the expert server's batching can reach at n clients.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def timed(fn, repeat: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def one_by_one_and_batch(handler, obj, inputs: list[dict], out: Path, repeat: int) -> tuple[float, float]:
    """Median seconds of the calls one by one, and of the same calls as one batch."""
    from models_local.handlers.base import Outputs

    def singly() -> None:
        for i in inputs:
            handler.call(obj, dict(i), Outputs(out))

    def together() -> None:
        handler.batch.call(obj, [dict(i) for i in inputs], [Outputs(out) for _ in inputs])

    return timed(singly, repeat), timed(together, repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import torch
    from tiny_vision import build_blip_captioner, build_sd, build_vit_classifier, draw_photo

    from models_local.handlers import HANDLERS
    from models_local.handlers.base import Device

    work = Path(tempfile.mkdtemp(prefix="ceiling-", dir=ROOT / ".tmp" if (ROOT / ".tmp").is_dir() else None))
    torch.manual_seed(0)
    photo = draw_photo(work / "photo.png")
    cpu = Device("cpu", torch.float32)
    cases = {
        "text-to-image": (
            build_sd(work / "sd"),
            [{"text": f"a red cat {i}", "steps": "10", "seed": str(i)} for i in range(args.n)],
        ),
        "image-classification": (build_vit_classifier(work / "vit"), [{"image": photo}] * args.n),
        "image-to-text": (build_blip_captioner(work / "blip"), [{"image": photo}] * args.n),
    }
    table: dict[str, dict] = {}
    for task, (folder, inputs) in cases.items():
        handler = HANDLERS[task]
        assert handler.batch is not None
        obj = handler.load(str(folder), cpu)
        for threads in (int(t) for t in args.threads.split(",")):
            torch.set_num_threads(threads)
            one_by_one, batch = one_by_one_and_batch(handler, obj, inputs, work / "out", args.repeat)
            table.setdefault(task, {})[f"{threads}_threads"] = {
                "one_by_one_ms": round(one_by_one * 1000, 1),
                "batch_ms": round(batch * 1000, 1),
                "ceiling": round(one_by_one / batch, 2),
            }
    print(
        json.dumps({"n": args.n, "nproc": os.cpu_count(), "load": os.getloadavg(), "tasks": table}, indent=2)
    )


if __name__ == "__main__":
    main()
