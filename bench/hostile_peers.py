"""The expert server against hostile clients, on this tree or another checkout of the project.

    python bench/hostile_peers.py [--tree DIR] [--stalls 100]

Starts `python -m models_local.serve` from the tree (flags every version has: --port, --models-dir,
a tiny random ViT classifier as the only model) and measures: a 12000x12000 PNG (140 kB) posted
for image classification (status, seconds, the server's resident memory growth at its peak), and
how many of --stalls connections that send a POST's headers but never its body are still open
after --wait seconds (35: past the 30 s body time-out). Run it on this tree and on an older
commit (--tree) in one session and compare.
"""

from __future__ import annotations

import argparse
import io
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def huge_png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (12000, 12000)).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def post(url: str, body: bytes) -> int:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "image/png"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status
    except urllib.error.HTTPError as err:
        return err.code


def still_held(sock: socket.socket) -> bool:
    """True while the server has neither answered nor closed the connection."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)  # an answer (408, 503) or the end: not held
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", type=Path, default=HERE)
    p.add_argument("--stalls", type=int, default=100)
    p.add_argument("--wait", type=float, default=35.0, help="seconds before stalled uploads are counted")
    args = p.parse_args()
    sys.path.insert(0, str(HERE / "tests"))
    from tiny_vision import build_vit_classifier

    with tempfile.TemporaryDirectory() as models:
        build_vit_classifier(Path(models) / "tiny" / "vit")
        port = free_port()
        env = {**os.environ, "PYTHONPATH": str(args.tree), "HF_HUB_OFFLINE": "1"}
        cmd = [sys.executable, "-m", "models_local.serve", "--port", str(port), "--models-dir", models]
        proc = subprocess.Popen(cmd, cwd=args.tree, env=env, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(f"{url}/health", timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.2)
            model = f"{url}/models/tiny/vit/pipeline/image-classification"
            post(model, _small_png())  # loads the model: not part of the measure
            body = huge_png()
            before, peak, done = rss_mb(proc.pid), [0.0], threading.Event()

            def watch() -> None:
                while not done.is_set():
                    peak[0] = max(peak[0], rss_mb(proc.pid))
                    time.sleep(0.02)

            threading.Thread(target=watch, daemon=True).start()
            started = time.monotonic()
            status = post(model, body)
            seconds = time.monotonic() - started
            done.set()
            print(
                f"12000x12000 PNG ({len(body) / 1e3:.0f} kB): HTTP {status} in {seconds:.2f} s, "
                f"server memory +{peak[0] - before:.0f} MB at its peak"
            )
            socks = []
            for _ in range(args.stalls):
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.sendall(
                    f"POST {model[len(url) :]} HTTP/1.1\r\nHost: x\r\nContent-Length: 9999\r\n\r\n".encode()
                )
                socks.append(s)
            time.sleep(args.wait)
            open_ = sum(still_held(s) for s in socks)
            print(
                f"{args.stalls} uploads stalled after their headers: {open_} held open after {args.wait:g} s"
            )
            for s in socks:
                s.close()
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def _small_png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (32, 32)).save(buf, format="PNG")
    return buf.getvalue()


if __name__ == "__main__":
    main()
