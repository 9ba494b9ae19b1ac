"""The expert server on Ray Serve: a single-node cluster on loopback (2 CPUs, no dashboard) running
the repository's serve_config.yaml with two replicas of the diffusion runner and the light group
in the ingress, tiny models; every test runs behind Ray's own HTTP proxy, then behind Ray's HAProxy
ingress.

Marked `ray`; without Ray installed these tests are skipped, unless HUGGINGGPT_REQUIRE_RAY=1 (as in
CI) makes that a failure. They take about two minutes: a cluster is started once for each proxy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from fakes.hf_inference_server import loopback_only
from serve_support import ROOT, RayCluster, free_port, models_folder, ray_config
from tiny_vision import draw_photo

pytestmark = pytest.mark.ray

if os.environ.get("HUGGINGGPT_REQUIRE_RAY") == "1":
    import ray.serve  # noqa: F401 (CI: a missing Ray is a failure, not a skip)
else:
    pytest.importorskip(
        "ray.serve", reason="Ray Serve is not installed (pip install -r requirements-serve.txt)"
    )

STEPS = 2  # the deployment's denoising steps; the in-process baseline uses the same

KILLER = """
import sys, ray
ray.init(address=sys.argv[1], namespace="serve", logging_level="ERROR", log_to_driver=False)
print("ready", flush=True)
for name in sys.stdin:
    ray.kill(ray.get_actor(name.strip(), namespace="serve"), no_restart=True)
    print("killed", flush=True)
"""


class Deployed:
    def __init__(self, cluster: RayCluster, url: str, models: Path, files: Path) -> None:
        self.cluster, self.url, self.models, self.files = cluster, url, models, files
        self._killer: subprocess.Popen | None = None
        self._killer_ready = False

    def listing(self) -> dict:
        with urllib.request.urlopen(f"{self.url}/models", timeout=10) as r:
            return json.loads(r.read())

    def arm_killer(self) -> None:
        """Start the driver that kills replicas; it takes seconds to connect to the cluster."""
        if self._killer is None:
            self._killer = subprocess.Popen(
                [sys.executable, "-c", KILLER, self.cluster.address],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=self.cluster.env,
                cwd=ROOT,
            )

    def wait_armed(self) -> None:
        """Until the killing driver is connected: then kill() acts at once."""
        self.arm_killer()
        if not self._killer_ready:
            assert self._killer.stdout.readline().strip() == "ready"
            self._killer_ready = True

    def kill(self, replica: str) -> None:
        """Kill a replica's actor as a crash would (a driver connected to this cluster does it)."""
        self.wait_armed()
        self._killer.stdin.write(replica + "\n")
        self._killer.stdin.flush()
        assert self._killer.stdout.readline().strip() == "killed"

    def close(self) -> None:
        if self._killer is not None:
            self._killer.kill()
            self._killer.wait(10)


@pytest.fixture(scope="module", params=["ray-proxy", "haproxy"])
def deployed(request, tmp_path_factory, tiny, tiny_vit, tiny_sd):
    """The app behind Ray's own HTTP proxy, then behind Ray's HAProxy ingress (docs/ray-serve.md)."""
    work = tmp_path_factory.mktemp("ray")
    models = models_folder(
        work / "models",
        {
            "tiny/sd": tiny_sd,
            "tiny/vit": tiny_vit,
            "tiny/vits": tiny("vits"),
            "tiny/audio-cls": tiny("wav2vec2-audio-classifier"),
        },
    )
    files = work / "files"
    files.mkdir()
    draw_photo(files / "photo.png")
    cluster = RayCluster(work, haproxy=request.param == "haproxy")
    try:
        config = ray_config(models, free_port(), replicas={"heavy": 2}, seed=0, diffusion_steps=STEPS)
        deployed = Deployed(cluster, cluster.deploy(config), models, files)
        try:
            yield deployed
        finally:
            deployed.close()
    finally:
        cluster.stop()


def test_with_haproxy_the_calls_reach_the_ingress_replica_through_it(deployed):
    if deployed.cluster.haproxy_dir is None:
        pytest.skip("Ray's own proxy: no HAProxy")
    photo = (deployed.files / "photo.png").read_bytes()
    request = urllib.request.Request(
        f"{deployed.url}/models/tiny/vit/pipeline/image-classification",
        data=photo,
        headers={"content-type": "image/png"},
    )
    with urllib.request.urlopen(request, timeout=60) as r:
        assert r.status == 200 and json.loads(r.read())[0]["label"]
    stats = f"http://127.0.0.1:{deployed.cluster.haproxy_stats_port}/stats;csv"
    with urllib.request.urlopen(stats, timeout=10) as r:
        header, *rows = [line.split(",") for line in r.read().decode().splitlines()]
    servers = {row[1]: dict(zip(header, row, strict=False)) for row in rows if row[0] == "http-experts"}
    ingress = [s for name, s in servers.items() if name.startswith("SERVE_REPLICA_experts-ingress")]
    # HAProxy sends the calls to the ingress replica itself; Ray's Python proxy is only its backup
    assert ingress and all(s["status"] == "UP" and s["act"] == "1" for s in ingress), servers
    assert all(s["bck"] == "1" for name, s in servers.items() if "PROXY" in name), servers


def test_a_driver_without_the_clusters_token_is_refused(deployed):
    """Token authentication is on (RAY_AUTH_MODE=token): whoever reaches the ports without the token
    runs nothing on the cluster."""
    env = {k: v for k, v in deployed.cluster.env.items() if k != "RAY_AUTH_TOKEN"}
    env["RAY_AUTH_TOKEN"] = "not-the-" + "clusters-token" * 3
    driver = f"import ray; ray.init(address={deployed.cluster.address!r}); print('connected')"
    done = subprocess.run(
        [sys.executable, "-c", driver], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and "connected" not in done.stdout
    assert "auth" in (done.stdout + done.stderr).lower()


def test_the_config_deploys_two_runner_replicas_that_hold_models(deployed):
    from huggingface_hub import InferenceClient

    listing = deployed.listing()
    assert listing["backend"] == "ray-serve" and {"tiny/sd", "tiny/vit"} <= {
        m["id"] for m in listing["models"]
    }
    sd = InferenceClient(model=f"{deployed.url}/models/tiny/sd/pipeline/text-to-image")
    vit = InferenceClient(model=f"{deployed.url}/models/tiny/vit/pipeline/image-classification")
    with loopback_only(), ThreadPoolExecutor(2) as pool:  # each group's replica loads its model meanwhile
        drawn = pool.submit(sd.text_to_image, "a cat")
        labelled = pool.submit(vit.image_classification, deployed.files / "photo.png")
        image, labels = drawn.result(), labelled.result()
    assert image.size == (32, 32) and len(labels) == 5
    resident = {(r["id"], r["group"]) for r in deployed.listing()["resident"]}
    assert {("tiny/sd", "heavy"), ("tiny/vit", "light")} <= resident
    # The light group runs in the ingress's replica (one Serve hop); the heavy one in its own.
    holders = {r["id"]: r["replica"] for r in deployed.listing()["resident"]}
    assert "#ingress#" in holders["tiny/vit"] and "#heavy#" in holders["tiny/sd"], holders


PLAN = {
    "tasks": [
        {"task": "text-to-image", "id": 0, "dep": [-1], "args": {"text": "a red cat on a mat"}},
        {
            "task": "image-to-image",
            "id": 1,
            "dep": [0],
            "args": {"image": "<resource>-0", "text": "a blue dog"},
        },
        {"task": "image-classification", "id": 2, "dep": [0], "args": {"image": "<resource>-0"}},
        {"task": "text-to-speech", "id": 3, "dep": [-1], "args": {"text": "hello world"}},
        {"task": "audio-classification", "id": 4, "dep": [3], "args": {"audio": "<resource>-3"}},
    ]
}
CARDS = [  # each task has one candidate: the models the server's folder holds
    ("tiny/sd", "text-to-image"),
    ("tiny/sd", "image-to-image"),
    ("tiny/vit", "image-classification"),
    ("tiny/vits", "text-to-speech"),
    ("tiny/audio-cls", "audio-classification"),
]


def in_process(deployed, out: Path, seeds: dict[int, int | None]) -> dict[int, dict]:
    """The plan's tasks on the in-process runtime: same models, the seeds the run gave each task (the
    server's for a task without one), its steps, and one torch thread as in a replica (float sums in
    another order could move a pixel)."""
    import torch

    from models_local import Runtime
    from models_local.handlers import diffusion

    runtime, model = Runtime(device="cpu"), lambda name: str(deployed.models / name)
    threads, steps = torch.get_num_threads(), diffusion.STEPS
    torch.set_num_threads(1)
    diffusion.STEPS = STEPS
    try:

        def run(task_id: int, task: str, name: str, **inputs: str) -> dict:
            seed = seeds.get(task_id)
            arts = runtime.run(task, model(name), inputs, out, seed=0 if seed is None else seed)
            return {a["kind"]: a.get("path", a.get("value")) for a in arts}

        drawn = run(0, "text-to-image", "tiny/sd", text="a red cat on a mat")
        speech = run(3, "text-to-speech", "tiny/vits", text="hello world")
        return {
            0: drawn,
            1: run(1, "image-to-image", "tiny/sd", image=drawn["image"], text="a blue dog"),
            2: run(2, "image-classification", "tiny/vit", image=drawn["image"]),
            3: speech,
            4: run(4, "audio-classification", "tiny/audio-cls", audio=speech["audio"]),
        }
    finally:
        torch.set_num_threads(threads)
        diffusion.STEPS = steps


def test_a_five_task_plan_runs_remote_through_the_cli_as_it_runs_in_process(deployed, tmp_path):
    import soundfile as sf
    from fakes.llm_server import FakeLLMServer
    from PIL import Image

    catalog = tmp_path / "experts.jsonl"
    catalog.write_text(
        "".join(json.dumps({"id": i, "task": t, "downloads": 10**12}) + "\n" for i, t in CARDS)
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HUGGINGGPT_EXPERTS_URL": deployed.url}
    with FakeLLMServer() as llm:
        llm.script("plan", json.dumps(PLAN))
        llm.script("respond", "Drawn, edited, labelled, spoken and heard.")
        done = subprocess.run(
            [sys.executable, "-m", "hugginggpt", "--llm-base-url", llm.url, "--llm-model", "fake"]
            + ["--llm-api-key", "sk-test", "--inference", "remote", "--catalog", str(catalog)]
            + ["--workdir", str(tmp_path / "ws"), "--json", "Draw a red cat, edit it, label it; say hello"],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=ROOT,
            env=env,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert "models: remote: remote (the expert server at" in done.stderr
    tasks = {t["id"]: t for t in out["tasks"]}
    assert all(t["status"] == "done" for t in tasks.values()), out["tasks"]
    got = {i: {o["kind"]: o.get("path", o.get("value")) for o in t["outputs"]} for i, t in tasks.items()}
    # The inference protocol carries a seed for text-to-image and image-to-image; the server's own
    # seed (0) serves the speech, whose client call has no seed to send.
    want = in_process(deployed, tmp_path / "local", {i: tasks[i].get("seed") for i in (0, 1)})
    for i in (0, 1):
        assert np.array_equal(
            np.asarray(Image.open(got[i]["image"])), np.asarray(Image.open(want[i]["image"]))
        ), i
    for i in (2, 4):
        assert got[i]["data"] == want[i]["data"], i
    heard, rate = sf.read(got[3]["audio"], dtype="float32")
    said, said_rate = sf.read(want[3]["audio"], dtype="float32")
    assert rate == said_rate and len(heard) > 0 and np.array_equal(heard, said)
    assert {(r["id"], r["group"]) for r in deployed.listing()["resident"]} >= {
        ("tiny/sd", "heavy"),
        ("tiny/vits", "light"),
        ("tiny/audio-cls", "light"),
    }


def test_a_replica_killed_mid_request_is_replaced_and_the_next_request_works(deployed):
    from huggingface_hub import InferenceClient
    from huggingface_hub.errors import HfHubHTTPError

    client = InferenceClient(model=f"{deployed.url}/models/tiny/sd/pipeline/text-to-image", timeout=120)
    deployed.arm_killer()  # it connects while the model warms up, so the kill lands mid-call
    with loopback_only():
        client.text_to_image("warm up")  # tiny/sd is now resident on one heavy replica
        deployed.wait_armed()
        (holder,) = [r["replica"] for r in deployed.listing()["resident"] if r["id"] == "tiny/sd"][-1:]
        outcome: dict = {}

        def slow_request() -> None:
            try:  # about 3 s of denoising on the replica that holds the model
                outcome["image"] = client.text_to_image("a slow cat", num_inference_steps=400)
            except HfHubHTTPError as exc:
                outcome["error"] = exc

        thread = threading.Thread(target=slow_request)
        thread.start()
        time.sleep(1.0)  # the call is running on `holder` now
        deployed.kill(holder)
        thread.join(120)
        assert not thread.is_alive()
        if "error" in outcome:  # allowed: a clear 503 that says what happened
            assert outcome["error"].response.status_code == 503 and "lost" in str(outcome["error"]), outcome
        else:
            assert outcome["image"].size == (32, 32)
        after = client.text_to_image("the next cat")
    assert after.size == (32, 32) and np.asarray(after).std() > 0
    latest = min(
        (r for r in deployed.listing()["resident"] if r["id"] == "tiny/sd"), key=lambda r: r["reported_s_ago"]
    )
    assert latest["replica"] != holder  # answered by another replica, or by the one Serve started instead


def test_a_runner_replica_batches_concurrent_calls_of_its_model(deployed, tmp_path):
    """Eight visitors draw at once: the heavy replicas run them in batches (the runtime's batcher
    behind each runner), and each image is the one its seed draws alone in-process."""
    import torch
    from test_serve_batching import draw_over_http, pixels

    from models_local import Runtime

    seeds, steps = list(range(20, 28)), 40  # a run long enough for the others to arrive meanwhile
    got = draw_over_http(deployed.url, seeds, steps=steps)
    # a replica takes 8 calls at once: the first runs alone, the others come as a batch (or two,
    # when Serve splits them between the replicas)
    assert sum(size > 1 for _, size in got.values()) >= 4, got
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a replica
    try:
        alone, sd = Runtime(device="cpu", batch_window_s=0), str(deployed.models / "tiny/sd")
        for seed in seeds:
            inputs = {"text": f"cat {seed}", "steps": str(steps)}
            expected = pixels(alone.run("text-to-image", sd, inputs, tmp_path, seed=seed))
            assert np.abs(got[seed][0] - expected).max() <= 2
    finally:
        torch.set_num_threads(threads)
