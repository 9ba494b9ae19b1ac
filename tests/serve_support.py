"""Shared by the expert-server tests and the serve benchmark: a models folder of tiny models, the
protocol server in a thread (uvicorn on 127.0.0.1), the `served` session fixture (that server with
tiny models for every task, and the in-process runtime behind it), and a single-node Ray cluster on
loopback with the repository's Serve config deployed on it."""

from __future__ import annotations

import copy
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from tiny_text_audio import write_tone
from tiny_vision import draw_photo

from models_local import Runtime
from models_local.serve import LocalBackend, create_app
from models_local.serve.models import ModelTable

ROOT = Path(__file__).resolve().parent.parent
SERVE_CONFIG = ROOT / "serve_config.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def models_folder(root: Path, models: dict[str, str]) -> Path:
    """root/<id> -> each model's folder (symlinks: the tiny models are built once per session)."""
    for model_id, folder in models.items():
        link = root / model_id
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(Path(folder).resolve(), target_is_directory=True)
    return root


def wait_healthy(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server process ended with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} was not healthy within {timeout:g} s")


@contextmanager
def serve_cli(
    args: list[str], *, env: dict[str, str] | None = None, log: Path | None = None, timeout: float = 60
) -> Iterator[str]:
    """`python -m models_local.serve --port <free> ARGS` in a process of its own, as users start it;
    yields its URL once healthy. Its output goes to `log` (None: nowhere)."""
    port = free_port()
    with open(log or os.devnull, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "models_local.serve", "--port", str(port), *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout, proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


@contextmanager
def protocol_server(app: Any) -> Iterator[str]:
    """The ASGI app under uvicorn in a thread, on 127.0.0.1 at a free port; yields its URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, 20)
        yield url
    finally:
        server.should_exit = True
        thread.join(10)


def ray_config(
    models_dir: Path,
    port: int,
    *,
    replicas: dict[str, int] | None = None,
    seed: int | None = 0,
    diffusion_steps: int | None = None,
) -> dict[str, Any]:
    """The repository's Serve config, fitted to a 2-core machine without a GPU: fixed replica
    counts instead of autoscaling, no GPUs, small CPU shares, this test's models and port."""
    config = copy.deepcopy(yaml.safe_load(SERVE_CONFIG.read_text()))
    config["http_options"]["port"] = port
    (app,) = config["applications"]
    app["args"].update(models_dir=str(models_dir), hub=False, seed=seed, diffusion_steps=diffusion_steps)
    replicas = {"ingress": 1, "heavy": 1, "light": 2, **(replicas or {})}
    for deployment in app["deployments"]:
        deployment.pop("autoscaling_config", None)
        deployment["num_replicas"] = replicas[deployment["name"]]
        deployment["ray_actor_options"] = {"num_cpus": 0.1 if deployment["name"] == "ingress" else 0.4}
    return config


def ray_temp_dir() -> Path:
    """Ray's session folder holds Unix sockets, whose paths may not pass 107 bytes: inside the
    checkout when its path is short, else a folder of its own under /tmp."""
    inside = ROOT / ".tmp" / "ray"
    if len(str(inside)) <= 32:
        return inside
    return Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))


class RayCluster:
    """`ray start --head --block` on loopback in its own process group (so this test's Ray, and only
    it, can be ended), and `serve run CONFIG` deployed on it. Token authentication is on, as the
    README says to run Ray: every process of the cluster and every driver needs `env`'s token."""

    def __init__(self, workdir: Path, *, cpus: int = 2, haproxy: bool = False) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
            "RAY_USAGE_STATS_ENABLED": "0",
            "HF_HUB_OFFLINE": "1",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
        }
        self.haproxy_dir: Path | None = None
        self.haproxy_stats_port = 0
        if haproxy:
            self.env.update(self._haproxy_env())
        ray = [sys.executable, "-m", "ray.scripts.scripts"]
        self.ray_cli = ray
        self.log = open(workdir / "ray-start.log", "w")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            [
                *ray,
                "start",
                "--head",
                "--block",
                "--disable-usage-stats",
                f"--num-cpus={cpus}",
                "--num-gpus=0",
                "--include-dashboard=false",
                f"--port={self.port}",
                "--node-ip-address=127.0.0.1",
                f"--ray-client-server-port={free_port()}",
                f"--dashboard-agent-listen-port={free_port()}",
                f"--object-store-memory={256 * 2**20}",
                f"--temp-dir={ray_temp_dir()}",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def deploy(self, config: dict[str, Any], timeout: float = 120) -> str:
        """`serve run CONFIG --non-blocking` against this cluster; returns the app's URL once healthy."""
        path = self.workdir / "serve_config.yaml"
        path.write_text(yaml.safe_dump(config))
        serve = [sys.executable, "-m", "ray.serve.scripts", "run", str(path), f"--address={self.address}"]
        end = time.monotonic() + timeout
        while "Ray runtime started" not in (self.workdir / "ray-start.log").read_text():
            if time.monotonic() > end or self.proc.poll() is not None:
                raise RuntimeError(
                    "ray start failed: " + (self.workdir / "ray-start.log").read_text()[-3000:]
                )
            time.sleep(0.2)
        while True:  # the cluster may still be starting
            done = subprocess.run(
                [*serve, "--non-blocking"],
                cwd=ROOT,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            if done.returncode == 0:
                break
            if time.monotonic() > end or self.proc.poll() is not None:
                raise RuntimeError(f"serve run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
            time.sleep(1)
        url = f"http://127.0.0.1:{config['http_options']['port']}"
        wait_healthy(url, max(5.0, end - time.monotonic()), self.proc)
        return url

    def _haproxy_env(self) -> dict[str, str]:
        """Ray Serve's HAProxy ingress (docs/ray-serve.md) in place of its Python proxy. Its files
        go to a folder of this cluster's (short: it holds Unix sockets, under a node-id folder),
        its stats and metrics listen on free ports: nothing is shared with another cluster."""
        self.haproxy_dir = Path(tempfile.mkdtemp(prefix="hgha-", dir="/tmp"))
        self.haproxy_stats_port = free_port()
        folder = str(self.haproxy_dir)
        return {
            "RAY_SERVE_ENABLE_HA_PROXY": "1",
            "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": f"{folder}/haproxy.cfg",
            "RAY_SERVE_HAPROXY_SOCKET_PATH": f"{folder}/admin.sock",
            "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": f"{folder}/metrics.sock",
            "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": folder,
            "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": f"{folder}/server-state",
            "RAY_SERVE_HAPROXY_STATS_PORT": str(self.haproxy_stats_port),
            "RAY_SERVE_HAPROXY_METRICS_PORT": str(free_port()),
        }

    def stop(self) -> None:
        # Every process of this cluster is in the process group `ray start` leads, and nothing
        # else is: end them all at once (a graceful stop drains Serve for 30 s).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self.log.close()
        if self.haproxy_dir is not None:  # HAProxy leaves the group: its reloads start new sessions
            kill_naming(f"{self.haproxy_dir}/")
            shutil.rmtree(self.haproxy_dir, ignore_errors=True)


def kill_naming(text: str) -> None:
    """SIGKILL every process whose command line holds `text` (Linux: /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if text.encode() in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
        except OSError:
            pass  # ended meanwhile, or not ours to read


# ---- the protocol server with tiny models, for the session -------------------------------------

SEED = 0  # the server's seed for requests that bring none


class RecordingBackend(LocalBackend):
    """The in-process backend, keeping each reply and how long its call took."""

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(runtime)
        self.replies: list[tuple[Any, float]] = []

    def call(self, job, stop):
        start = time.monotonic()
        reply = super().call(job, stop)
        self.replies.append((reply, time.monotonic() - start))
        return reply


@dataclass
class Served:
    url: str
    runtime: Runtime
    backend: RecordingBackend
    root: Path
    files: Path

    def client(self, model: str, task: str | None = None, timeout: float = 60) -> Any:
        """huggingface_hub's InferenceClient for a model on this server, as for an Inference Endpoint."""
        from huggingface_hub import InferenceClient

        tail = f"/pipeline/{task}" if task else ""
        return InferenceClient(model=f"{self.url}/models/{model}{tail}", timeout=timeout)

    def local(self, task: str, model: str, seed: int | None = SEED, **inputs: Any) -> dict[str, Any]:
        """The in-process runtime's result: {kind: value or file bytes} (lists when repeated)."""
        arts = self.runtime.run(
            task, str((self.root / model).resolve()), inputs, self.files / "local", seed=seed
        )
        got: dict[str, Any] = {}
        for a in arts:
            value = Path(a["path"]).read_bytes() if "path" in a else a["value"]
            got.setdefault(a["kind"], []).append(value)
        return {k: v[0] if len(v) == 1 else v for k, v in got.items()}


@pytest.fixture(scope="session")
def served(
    tmp_path_factory,
    tiny,
    tiny_vit,
    tiny_detr,
    tiny_segformer,
    tiny_dpt,
    tiny_blip,
    tiny_blip_vqa,
    tiny_donut,
    tiny_sd,
):
    root = tmp_path_factory.mktemp("served")
    models = models_folder(
        root / "models",
        {
            "tiny/bert-cls": tiny("bert-classifier"),
            "tiny/bert-tagger": tiny("bert-tagger"),
            "tiny/bert-qa": tiny("bert-qa"),
            "tiny/embedder": tiny("bert-embedder"),
            "tiny/t5": tiny("t5"),
            "tiny/gpt2": tiny("gpt2"),
            "tiny/llama-chat": tiny("llama-chat"),
            "tiny/wav2vec2-ctc": tiny("wav2vec2-ctc"),
            "tiny/audio-cls": tiny("wav2vec2-audio-classifier"),
            "tiny/vits": tiny("vits"),
            "tiny/speecht5-vc": tiny("speecht5-vc"),
            "tiny/skops": tiny("sklearn-skops"),
            "tiny/vit": tiny_vit,
            "tiny/detr": tiny_detr,
            "tiny/segformer": tiny_segformer,
            "tiny/dpt": tiny_dpt,
            "tiny/blip": tiny_blip,
            "tiny/blip-vqa": tiny_blip_vqa,
            "tiny/donut": tiny_donut,
            "tiny/sd": tiny_sd,
        },
    )
    files = root / "files"
    files.mkdir()
    draw_photo(files / "photo.png")
    write_tone(files / "tone.wav", seconds=1.0, rate=16000)
    runtime = Runtime(memory_budget_bytes=8 * 2**30, device="cpu")
    backend = RecordingBackend(runtime)
    try:
        with protocol_server(create_app(backend, ModelTable(models, hub=False), seed=SEED)) as url:
            yield Served(url, runtime, backend, models, files)
    finally:
        backend.close()
