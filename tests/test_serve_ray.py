"""The expert server on Ray Serve: a single-node cluster on loopback (2 CPUs, no dashboard) running
the repository's serve_config.yaml with two replicas of the diffusion runner, tiny models.

Marked `ray`; without Ray installed these tests are skipped, unless HUGGINGGPT_REQUIRE_RAY=1 (as in
CI) makes that a failure. They take about a minute: the cluster is started once for the module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
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

    def listing(self) -> dict:
        with urllib.request.urlopen(f"{self.url}/models", timeout=10) as r:
            return json.loads(r.read())

    def kill(self, replica: str) -> None:
        """Kill a replica's actor as a crash would (a driver connected to this cluster does it)."""
        if self._killer is None:
            self._killer = subprocess.Popen(
                [sys.executable, "-c", KILLER, self.cluster.address],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=self.cluster.env,
                cwd=ROOT,
            )
            assert self._killer.stdout.readline().strip() == "ready"
        self._killer.stdin.write(replica + "\n")
        self._killer.stdin.flush()
        assert self._killer.stdout.readline().strip() == "killed"

    def close(self) -> None:
        if self._killer is not None:
            self._killer.kill()
            self._killer.wait(10)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, tiny, tiny_vit, tiny_sd):
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
    cluster = RayCluster(work)
    try:
        config = ray_config(
            models, free_port(), replicas={"heavy": 2, "light": 1}, seed=0, diffusion_steps=STEPS
        )
        deployed = Deployed(cluster, cluster.deploy(config), models, files)
        try:
            yield deployed
        finally:
            deployed.close()
    finally:
        cluster.stop()


def test_the_config_deploys_two_runner_replicas_that_hold_models(deployed):
    from huggingface_hub import InferenceClient

    listing = deployed.listing()
    assert listing["backend"] == "ray-serve" and {"tiny/sd", "tiny/vit"} <= {
        m["id"] for m in listing["models"]
    }
    with loopback_only():
        image = InferenceClient(model=f"{deployed.url}/models/tiny/sd/pipeline/text-to-image").text_to_image(
            "a cat"
        )
        labels = InferenceClient(
            model=f"{deployed.url}/models/tiny/vit/pipeline/image-classification"
        ).image_classification(deployed.files / "photo.png")
    assert image.size == (32, 32) and len(labels) == 5
    resident = {(r["id"], r["group"]) for r in deployed.listing()["resident"]}
    assert {("tiny/sd", "heavy"), ("tiny/vit", "light")} <= resident


def test_a_replica_killed_mid_request_is_replaced_and_the_next_request_works(deployed):
    from huggingface_hub import InferenceClient
    from huggingface_hub.errors import HfHubHTTPError

    client = InferenceClient(model=f"{deployed.url}/models/tiny/sd/pipeline/text-to-image", timeout=120)
    with loopback_only():
        client.text_to_image("warm up")  # tiny/sd is now resident on one heavy replica
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
