"""The expert server under load: in-process vs Ray Serve with one and two runner replicas, and the
cost of the protocol hop for a warm model.

    python bench/serve_throughput.py [--requests 16] [--steps 20] [--hop-calls 40] [--no-ray]

Throughput: `--requests` concurrent text-to-image requests (tiny Stable Diffusion, `--steps`
denoising steps on CPU: compute-bound, no I/O) answered by
  - the runtime in this process (threads calling Runtime.run: the baseline),
  - Ray Serve with one replica of the diffusion runner, then with two (a single-node cluster on
    loopback with every CPU of this machine, serve_config.yaml fitted to it),
reported as requests per second and p50/p95 latency, in one run.
Protocol hop: a warm tiny ViT image classification called in-process and, alternately, through
`python -m models_local.serve`'s app (uvicorn on 127.0.0.1) or through Ray Serve; the median of the
per-pair differences is what the HTTP hop (and Ray's routing) adds per call.

One run on the 2-core development machine (shared with other jobs, so in-process torch with 2
threads suffered most from the load; Ray replicas run torch on 1 thread each), 16 requests, 20 steps:
  in-process          1.30 req/s   p50 4.55 s   p95 11.79 s
  Ray, 1 replica      2.31 req/s   p50 4.06 s   p95  6.60 s
  Ray, 2 replicas     2.97 req/s   p50 3.06 s   p95  5.02 s
  hop per warm call   uvicorn +2.2 ms, Ray Serve +24.6 ms (in-process call 7-11 ms)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def burst(call, n: int) -> dict[str, float]:
    """n calls at once; requests/s over the burst, and latency percentiles."""

    def timed(i: int) -> float:
        t0 = time.perf_counter()
        call(i)
        return time.perf_counter() - t0

    start = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        latencies = list(pool.map(timed, range(n)))
    wall = time.perf_counter() - start
    return {"rps": n / wall, "p50_s": statistics.median(latencies), "p95_s": p95(latencies), "wall_s": wall}


def paired(local, remote, n: int) -> dict[str, float]:
    """Median time of each of two calls made alternately (so both see the same machine load), and
    the median of their per-pair differences: what the remote path adds per call."""
    local(), remote()  # warm
    a, b = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        local()
        t1 = time.perf_counter()
        remote()
        t2 = time.perf_counter()
        a.append(t1 - t0)
        b.append(t2 - t1)
    return {
        "in_process_ms": round(statistics.median(a) * 1000, 2),
        "served_ms": round(statistics.median(b) * 1000, 2),
        "overhead_ms": round(statistics.median(y - x for x, y in zip(a, b, strict=True)) * 1000, 2),
    }


def post(url: str, body: bytes, content_type: str) -> bytes:
    request = urllib.request.Request(url, data=body, headers={"content-type": content_type})
    with urllib.request.urlopen(request, timeout=300) as r:
        return r.read()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--hop-calls", type=int, default=40)
    ap.add_argument("--no-ray", action="store_true", help="in-process and uvicorn only")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a killed run still stops its Ray cluster

    import torch
    from serve_support import RayCluster, free_port, models_folder, protocol_server, ray_config
    from tiny_vision import build_sd, build_vit_classifier, draw_photo

    from models_local import Runtime
    from models_local.serve import LocalBackend, create_app
    from models_local.serve.models import ModelTable

    results: dict[str, object] = {"nproc": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    work = Path(
        tempfile.mkdtemp(prefix="serve-bench-", dir=ROOT / ".tmp" if (ROOT / ".tmp").is_dir() else None)
    )
    torch.manual_seed(0)
    models = models_folder(
        work / "models",
        {"tiny/sd": str(build_sd(work / "sd")), "tiny/vit": str(build_vit_classifier(work / "vit"))},
    )
    photo = Path(draw_photo(work / "photo.png"))
    image = photo.read_bytes()
    prompt = json.dumps({"inputs": "a red cat", "parameters": {"num_inference_steps": args.steps}}).encode()
    sd, vit = str(models / "tiny/sd"), str(models / "tiny/vit")

    # ---- in-process baseline --------------------------------------------------------------------
    runtime = Runtime(device="cpu")
    out = work / "out"
    draw = {"text": "a red cat", "steps": str(args.steps)}
    runtime.run("text-to-image", sd, draw, out)  # warm
    results["in_process"] = burst(lambda i: runtime.run("text-to-image", sd, draw, out), args.requests)

    def classify_here() -> None:
        runtime.run("image-classification", vit, {"image": str(photo)}, out)

    hop = {}

    # ---- the protocol app without Ray --------------------------------------------------------------
    with protocol_server(create_app(LocalBackend(runtime), ModelTable(models, hub=False))) as url:
        classify = f"{url}/models/tiny/vit/pipeline/image-classification"
        hop["uvicorn"] = paired(classify_here, lambda: post(classify, image, "image/png"), args.hop_calls)

    # ---- Ray Serve: one diffusion runner replica, then two -------------------------------------------
    if not args.no_ray:
        cluster = RayCluster(work, cpus=os.cpu_count() or 2)
        try:
            port = free_port()  # Serve's HTTP options are fixed once it runs: the same for both deploys
            for replicas in (1, 2):
                config = ray_config(models, port, replicas={"heavy": replicas, "light": 1})
                for d in config["applications"][0]["deployments"]:  # 2 heavy replicas fit 2 CPUs
                    d["ray_actor_options"]["num_cpus"] = 0.9 if d["name"] == "heavy" else 0.1
                url = cluster.deploy(config)  # the second time, Serve updates the running app in place
                draw_url = f"{url}/models/tiny/sd/pipeline/text-to-image"
                _until_replicas(url, draw_url, prompt, replicas)
                results[f"ray_{replicas}_replica"] = burst(
                    lambda i, u=draw_url: post(u, prompt, "application/json"), args.requests
                )
            classify = f"{url}/models/tiny/vit/pipeline/image-classification"
            hop["ray_serve"] = paired(
                classify_here, lambda: post(classify, image, "image/png"), args.hop_calls
            )
        finally:
            cluster.stop()
    results["warm_call_hop"] = hop
    print(json.dumps(results, indent=2))


def _until_replicas(url: str, draw_url: str, prompt: bytes, replicas: int, timeout: float = 180) -> None:
    """Warm every replica: bursts of requests until `replicas` distinct replicas report the model."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        start = time.monotonic()
        with ThreadPoolExecutor(4 * replicas) as pool:
            list(pool.map(lambda _: post(draw_url, prompt, "application/json"), range(4 * replicas)))
        with urllib.request.urlopen(f"{url}/models", timeout=10) as r:
            resident = json.loads(r.read())["resident"]
        this_burst = time.monotonic() - start
        holders = {
            r["replica"] for r in resident if r["id"] == "tiny/sd" and r["reported_s_ago"] <= this_burst
        }
        if len(holders) >= replicas:
            return
    raise TimeoutError(f"{replicas} replicas did not come up within {timeout:g} s")


if __name__ == "__main__":
    main()
