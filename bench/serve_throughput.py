"""The expert server under load: in-process vs Ray Serve with one and two runner replicas, and the
cost of the protocol hop for a warm model.

    python bench/serve_throughput.py [--requests 16] [--steps 20] [--hop-calls 40] [--no-ray]
                                     [--batching-only] [--clients 1,4,8,16] [--calls 4]

Throughput: `--requests` concurrent text-to-image requests (tiny Stable Diffusion, `--steps`
denoising steps on CPU: compute-bound, no I/O) answered by
  - the runtime in this process (threads calling Runtime.run: the baseline),
  - Ray Serve with one replica of the diffusion runner, then with two (a single-node cluster on
    loopback with every CPU of this machine, serve_config.yaml fitted to it),
reported as requests per second and p50/p95 latency, in one run.
Batching (models_local/batching.py): `--clients` clients each make `--calls` calls one after
another to the same model through `python -m models_local.serve`'s app (uvicorn on 127.0.0.1), on
the tiny text-to-image (10 steps), image-classification and captioning models, with batching on
(the default window) and off, in one run: requests per second and p95 latency.
Protocol hop: a warm tiny ViT image classification called in-process and, in turn, through
`python -m models_local.serve`'s app (uvicorn on 127.0.0.1) or through Ray Serve; the median of the
per-round differences is what the HTTP hop (and Ray's routing) adds per call. With --hop-only, Ray
Serve runs the shipped app (light tasks in the ingress: one Serve hop) and beside it the same app
with the light group as a deployment of its own (`/two-hop`: proxy, ingress, runner), called in
turn; and for each server, where a call's time goes (`*_steps_ms`: GET /health, a POST refused
before and after its body is read, the call). Then the same on a second cluster with Ray's HAProxy
ingress (RAY_SERVE_ENABLE_HA_PROXY=1): the `haproxy_*` keys.

One run on the 2-core development machine (shared with other jobs, so in-process torch with 2
threads suffered most from the load; Ray replicas run torch on 1 thread each), 16 requests, 20 steps:
  in-process          1.30 req/s   p50 4.55 s   p95 11.79 s
  Ray, 1 replica      2.31 req/s   p50 4.06 s   p95  6.60 s
  Ray, 2 replicas     2.97 req/s   p50 3.06 s   p95  5.02 s
  hop per warm call   uvicorn +2.2 ms, Ray Serve +24.6 ms (two hops then; in-process call 7-11 ms)

Batching (--batching-only): each server is `python -m models_local.serve` in a process of its own
with its defaults but the mode's options (`off`: --batch-window-ms 0; `on`: the defaults, a batch on
every core; `on_lone_threads`: a batch on the lone call's threads), the clients in this process;
rows of at least 3 s. Requests/s on/off at 8 clients, quiet machine, three runs: text-to-image
2.57x, 2.55x, 2.58x (on_lone_threads 2.24x, 2.05x, 2.64x); classification 1.20x, 1.27x, 1.48x;
captioning 3.96x, 5.56x. At 16 clients text-to-image 2.56x and 3.54x. A lone call's p95 on/off
0.91 to 1.09. The tiny Stable Diffusion draws 8 prompts in one batch on 2 threads 3.3x faster than
one by one on 1 thread (bench/batch_ceiling.py): the ceiling of `on` here. A classification is
about 1 ms of model in 4 to 5 ms of per-request Python (HTTP, parsing), which batching cannot share.
Hop (--hop-only): a warm classification +2 to 3 ms through uvicorn; through Ray Serve's Python
proxy +12.7 to +18.2 ms with one hop against +17.3 to +35.0 ms with two (+27.3 ms before one hop).
Its floor: a POST refused before its body is read 8 to 10 ms, after it 13 to 16 ms (the replica
fetches the body from the proxy), against 1 ms through uvicorn. Behind Ray's HAProxy: +1.8 and
+3.2 ms with one hop (two runs; the Python proxy +14.6 ms in the second: 0.22x), a refused POST 2 ms.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from functools import partial
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


def paired(local, remotes: list, n: int) -> list[dict[str, float]]:
    """The local call and each remote one made in turn (so all see the same machine load): per
    remote, the median time of both and the median of their per-round differences, what the
    remote path adds per call."""
    local(), [remote() for remote in remotes]  # warm
    here: list[float] = []
    there: list[list[float]] = [[] for _ in remotes]
    for _ in range(n):
        t0 = time.perf_counter()
        local()
        here.append(time.perf_counter() - t0)
        for times, remote in zip(there, remotes, strict=True):
            t0 = time.perf_counter()
            remote()
            times.append(time.perf_counter() - t0)
    return [
        {
            "in_process_ms": round(statistics.median(here) * 1000, 2),
            "served_ms": round(statistics.median(times) * 1000, 2),
            "overhead_ms": round(
                statistics.median(y - x for x, y in zip(here, times, strict=True)) * 1000, 2
            ),
        }
        for times in there
    ]


def post(url: str, body: bytes, content_type: str) -> bytes:
    request = urllib.request.Request(url, data=body, headers={"content-type": content_type})
    with urllib.request.urlopen(request, timeout=300) as r:
        return r.read()


def batch_of(url: str, body: bytes, content_type: str) -> int:
    """POST; how many calls the server's model ran together with this one."""
    request = urllib.request.Request(url, data=body, headers={"content-type": content_type})
    with urllib.request.urlopen(request, timeout=300) as r:
        r.read()
        return int(r.headers.get("x-batch-size", "0"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--hop-calls", type=int, default=40)
    ap.add_argument("--no-ray", action="store_true", help="in-process and uvicorn only")
    ap.add_argument("--batching-only", action="store_true", help="only the batching table")
    ap.add_argument("--hop-only", action="store_true", help="only the warm-call hop (one Ray deploy)")
    ap.add_argument("--clients", default="1,4,8,16", help="client counts for the batching table")
    ap.add_argument("--calls", type=int, default=4, help="calls per client in the batching table")
    ap.add_argument("--tasks", default="", help="batching table: these tasks only (comma-separated)")
    ap.add_argument(
        "--windows-ms", default="", help="batching table: also these windows (on_<ms>), e.g. 5,50"
    )
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # a killed run still stops its Ray cluster

    import torch
    from serve_support import models_folder, protocol_server
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
    if args.batching_only:
        results["batching"] = batching_table(
            work,
            models,
            image,
            [int(c) for c in args.clients.split(",")],
            args.calls,
            tasks=[t for t in args.tasks.split(",") if t],
            windows_ms=[float(w) for w in args.windows_ms.split(",") if w],
        )
        print(json.dumps(results, indent=2))
        return

    # ---- in-process baseline --------------------------------------------------------------------
    runtime = Runtime(device="cpu")
    out = work / "out"
    draw = {"text": "a red cat", "steps": str(args.steps)}
    runtime.run("text-to-image", sd, draw, out)  # warm
    if not args.hop_only:
        results["in_process"] = burst(lambda i: runtime.run("text-to-image", sd, draw, out), args.requests)

    def classify_here() -> None:
        runtime.run("image-classification", vit, {"image": str(photo)}, out)

    hop = {}

    # ---- the protocol app without Ray --------------------------------------------------------------
    with protocol_server(create_app(LocalBackend(runtime), ModelTable(models, hub=False))) as url:
        classify = f"{url}/models/tiny/vit/pipeline/image-classification"
        (hop["uvicorn"],) = paired(
            classify_here, [lambda: post(classify, image, "image/png")], args.hop_calls
        )
        hop["uvicorn_health_ms"] = health_ms(url, args.hop_calls)
        hop["uvicorn_steps_ms"] = steps_ms(url, image, args.hop_calls)

    if not args.no_ray:  # Ray Serve: one diffusion runner replica, then two
        ray_serve(args, work, models, prompt, image, classify_here, results, hop)
    results["warm_call_hop"] = hop
    print(json.dumps(results, indent=2))


def ray_serve(
    args, work: Path, models: Path, prompt: bytes, image: bytes, classify_here, results, hop
) -> None:
    """Throughput with one and two diffusion runner replicas (one deploy with --hop-only), then the
    warm-call hop through Ray Serve; into `results` and `hop`."""
    ray_cluster(args, work, models, prompt, image, classify_here, results, hop, haproxy=False)
    if args.hop_only:  # the same behind Ray's HAProxy ingress (docs/ray-serve.md)
        with_haproxy: dict = {}
        ray_cluster(args, work, models, prompt, image, classify_here, results, with_haproxy, haproxy=True)
        hop.update({f"haproxy_{key}": value for key, value in with_haproxy.items()})


def ray_cluster(
    args, work: Path, models: Path, prompt: bytes, image: bytes, classify_here, results, hop, *, haproxy: bool
) -> None:
    from serve_support import RayCluster, free_port, ray_config

    cluster = RayCluster(work, cpus=os.cpu_count() or 2, haproxy=haproxy)
    try:
        port = free_port()  # Serve's HTTP options are fixed once it runs: the same for both deploys
        for replicas in (1,) if args.hop_only else (1, 2):
            config = ray_config(models, port, replicas={"heavy": replicas})
            for d in config["applications"][0]["deployments"]:  # 2 heavy replicas fit 2 CPUs
                d["ray_actor_options"]["num_cpus"] = 0.9 if d["name"] == "heavy" else 0.1
            if args.hop_only:
                with_two_hop_app(config)
            url = cluster.deploy(config)  # the second time, Serve updates the running app in place
            draw_url = f"{url}/models/tiny/sd/pipeline/text-to-image"
            _until_replicas(url, draw_url, prompt, replicas)
            if args.hop_only:
                break
            results[f"ray_{replicas}_replica"] = burst(
                lambda i, u=draw_url: post(u, prompt, "application/json"), args.requests
            )
        classify = [f"{url}{p}/models/tiny/vit/pipeline/image-classification" for p in ("", TWO_HOPS)]
        served = [partial(post, c, image, "image/png") for c in classify[: 2 if args.hop_only else 1]]
        hop["ray_serve"], *two = paired(classify_here, served, args.hop_calls)
        hop["ray_serve_health_ms"] = health_ms(url, args.hop_calls)  # the proxy and ingress only
        if two:
            hop["ray_serve_two_hops"] = two[0]
            hop["one_over_two_hops"] = round(
                two[0]["overhead_ms"] and hop["ray_serve"]["overhead_ms"] / two[0]["overhead_ms"], 2
            )
            hop["ray_serve_two_hops_health_ms"] = health_ms(url + TWO_HOPS, args.hop_calls)
            hop["ray_serve_steps_ms"] = steps_ms(url, image, args.hop_calls)
            hop["ray_serve_two_hops_steps_ms"] = steps_ms(url + TWO_HOPS, image, args.hop_calls)
            hop["ray_handle_ms"] = handle_ms(cluster, models / "tiny/vit", image, args.hop_calls)
    finally:
        cluster.stop()


TWO_HOPS = "/two-hop"


def with_two_hop_app(config: dict) -> None:
    """Beside the app, the same app at /two-hop with its light group as a runner deployment of its
    own (as before one hop): proxy, ingress, then runner, measured in the same run."""
    app = config["applications"][0]
    for d in app["deployments"]:
        d["ray_actor_options"]["num_cpus"] = 0.4 if d["name"] == "heavy" else 0.1  # two apps on 2 CPUs
    two = copy.deepcopy(app)
    two.update(name="experts-two-hop", route_prefix=TWO_HOPS)
    two["args"]["groups"]["light"]["in_ingress"] = False
    light = {
        "name": "light",
        "num_replicas": 1,
        "max_ongoing_requests": 8,
        "ray_actor_options": {"num_cpus": 0.1},
    }
    two["deployments"].append(light)
    config["applications"].append(two)


# A driver on the cluster calls the two-hop app's light runner's handle as its ingress does (no
# proxy, no ingress): the time of one deployment hop plus the runner's own call.
HANDLE_DRIVER = """
import statistics, sys, time
import ray
from ray import serve
from models_local.serve.jobs import Job, Media
ray.init(address=sys.argv[1], namespace="serve", logging_level="ERROR", log_to_driver=False)
image = open(sys.argv[3], "rb").read()
job = Job("image-classification", "tiny/vit", sys.argv[2], {}, {"image": Media(image, ".png")})
handle = serve.get_deployment_handle("light", "experts-two-hop").options(multiplexed_model_id="tiny/vit")
handle.run.remote(job).result()
times = []
for _ in range(int(sys.argv[4])):
    t0 = time.perf_counter()
    assert handle.run.remote(job).result().ok
    times.append(time.perf_counter() - t0)
print(round(statistics.median(times) * 1000, 2))
"""


def handle_ms(cluster, source: Path, image: bytes, n: int) -> float:
    """Median ms of a warm classification through the runner's handle alone (HANDLE_DRIVER)."""

    photo = cluster.workdir / "handle-photo.png"
    photo.write_bytes(image)
    done = subprocess.run(
        [sys.executable, "-c", HANDLE_DRIVER, cluster.address, str(source), str(photo), str(n)],
        env=cluster.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def steps_ms(url: str, image: bytes, n: int) -> dict[str, float]:
    """Where a served call's time goes, as medians of requests that stop earlier and earlier, made in
    turn: GET /health (no body, no model), a POST refused before its body is read (an unknown
    model: 404), one refused after it (bytes that are no image: 400), and the warm call itself."""
    junk = b"x" * len(image)
    calls = {
        "get_health": lambda: urllib.request.urlopen(f"{url}/health", timeout=30).read(),
        "post_refused_before_body": lambda: _refused(
            f"{url}/models/absent/pipeline/image-classification", image
        ),
        "post_refused_after_body": lambda: _refused(
            f"{url}/models/tiny/vit/pipeline/image-classification", junk
        ),
        "post_call": lambda: post(f"{url}/models/tiny/vit/pipeline/image-classification", image, "image/png"),
    }
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(n):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
    return {name: round(statistics.median(t) * 1000, 2) for name, t in times.items()}


def _refused(url: str, body: bytes) -> None:
    try:
        post(url, body, "image/png")
    except urllib.error.HTTPError as exc:
        assert exc.code in (400, 404), exc.code
        return
    raise AssertionError(f"{url} answered a call it should refuse")


def health_ms(url: str, n: int) -> float:
    """Median time of GET /health: the HTTP hop to the app alone, no model and no runner."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        with urllib.request.urlopen(f"{url}/health", timeout=30) as r:
            r.read()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 2)


def batching_table(
    work: Path,
    models: Path,
    image: bytes,
    clients: list[int],
    calls: int,
    lone: int = 30,
    tasks: list[str] | None = None,
    windows_ms: list[float] | None = None,
) -> dict:
    """Concurrent same-model calls through the uvicorn app, batching off and on (the default
    window, and `windows_ms` as on_<ms>): per task and number of clients, requests/s and p95
    (closed loop: each client calls again once answered); `tasks`: only these."""
    from serve_support import models_folder
    from tiny_vision import build_blip_captioner

    from models_local.serve.settings import server_threads

    models_folder(models, {"tiny/blip": str(build_blip_captioner(work / "blip"))})
    draw = json.dumps({"inputs": "a red cat", "parameters": {"num_inference_steps": 10}}).encode()
    every = {
        "text-to-image": ("tiny/sd", draw, "application/json"),
        "image-classification": ("tiny/vit", image, "image/png"),
        "image-to-text": ("tiny/blip", image, "image/png"),
    }
    chosen = {task: every[task] for task in (tasks or every)}
    # server options by mode; on_lone_threads: batches on as many torch threads as a lone call
    modes = {
        "off": ["--batch-window-ms", "0"],
        "on": [],
        "on_lone_threads": ["--batch-torch-threads", str(server_threads())],
        **{f"on_{w:g}ms": ["--batch-window-ms", f"{w:g}"] for w in windows_ms or []},
    }
    table: dict[str, dict] = {}
    with ExitStack() as stack:  # every server up at once: each row runs off then on, same load
        urls = {
            mode: stack.enter_context(serve_process(models, options, work / f"serve-{mode}.log"))
            for mode, options in modes.items()
        }
        for task, (model, body, content_type) in chosen.items():
            off, on = (f"{urls[mode]}/models/{model}/pipeline/{task}" for mode in ("off", "on"))
            for url in urls.values():  # every server loads the model before it is timed
                post(f"{url}/models/{model}/pipeline/{task}", body, content_type)
            table.setdefault(task, {})["lone"] = lone_p95(
                partial(post, off, body, content_type), partial(post, on, body, content_type), lone
            )
            for n in clients:
                for mode, url in urls.items():
                    target = f"{url}/models/{model}/pipeline/{task}"
                    table.setdefault(task, {}).setdefault(str(n), {})[mode] = closed_loop(
                        lambda t=target, b=body, c=content_type: batch_of(t, b, c), n, calls
                    )
    for rows in table.values():
        for n in map(str, clients):
            for mode in list(modes)[1:]:
                name = "speedup" if mode == "on" else f"speedup_{mode}"
                rows[n][name] = round(rows[n][mode]["rps"] / rows[n]["off"]["rps"], 2)
    return table


def serve_process(models: Path, options: list[str], log: Path):
    """`python -m models_local.serve` with its defaults (torch's threads among them) but `options`,
    in a process of its own as deployed: the clients' Python does not share its GIL."""
    from serve_support import serve_cli

    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    args = ["--no-hub", "--models-dir", str(models), "--max-connections-per-client", "64", *options]
    return serve_cli(args, env=env, log=log, timeout=120)


def lone_p95(off, on, n: int) -> dict[str, float]:
    """One client, `n` calls to each server, alternately (the same load for both): p95 in ms."""
    times: dict[str, list[float]] = {"off": [], "on": []}
    off(), on()  # load and warm
    for _ in range(n):
        for mode, call in (("off", off), ("on", on)):
            t0 = time.perf_counter()
            call()
            times[mode].append(time.perf_counter() - t0)
    result = {f"{mode}_p95_ms": round(p95(t) * 1000, 1) for mode, t in times.items()}
    return {**result, "ratio": round(result["on_p95_ms"] / result["off_p95_ms"], 2)}


def closed_loop(call, clients: int, calls: int, min_s: float = 3.0) -> dict[str, float]:
    """`clients` threads, each making `calls` calls one after another, and more until `min_s` has
    passed: a fast model's row lasts long enough that another job's moment does not decide it.
    `call` returns the batch its call ran in; the mean batch a call saw is reported."""
    latencies: list[float] = []
    batches: list[int] = []
    start = time.perf_counter()

    def client(_: int) -> None:
        made = 0
        while made < calls or time.perf_counter() - start < min_s:
            t0 = time.perf_counter()
            batches.append(call())
            latencies.append(time.perf_counter() - t0)
            made += 1

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    wall = time.perf_counter() - start
    return {
        "rps": round(len(latencies) / wall, 2),
        "p95_ms": round(p95(latencies) * 1000, 1),
        "batch": round(statistics.mean(batches), 2),
    }


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
