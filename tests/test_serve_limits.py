"""`python -m models_local.serve` as users run it (a subprocess on 127.0.0.1) against hostile clients:
a picture of 144 megapixels in 419 kB, an hour of audio, bodies that stall after their headers, more
connections than it takes. Each is answered from headers alone, in well under a second."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile
from PIL import Image
from serve_support import ROOT, free_port, serve_cli, wait_healthy

MODEL = "/models/acme/any/pipeline/"  # a hub id: resolves without loading anything


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1]) / 1024


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, subprocess.Popen]]:
    port = free_port()
    flags = ["--port", str(port), "--body-seconds", "1", "--max-connections", "8"]
    flags += ["--max-connections-per-client", "8"]  # one client may fill it: the global limit is tested
    proc = subprocess.Popen(
        [sys.executable, "-m", "models_local.serve", *flags],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, 60, proc)
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def post(url: str, body: bytes, content_type: str) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def huge_png() -> bytes:
    buf = io.BytesIO()
    Image.new("L", (12000, 12000)).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def test_a_huge_image_is_refused_from_its_header(server):
    url, proc = server
    body = huge_png()
    before = rss_mb(proc.pid)
    started = time.monotonic()
    status, text = post(url + MODEL + "image-classification", body, "image/png")
    seconds = time.monotonic() - started
    grew = rss_mb(proc.pid) - before
    print(
        f"\n{len(body) / 1e3:.0f} kB PNG of 144 Mpx: HTTP {status} in {seconds:.2f} s, server +{grew:.0f} MB"
    )
    assert status == 413 and "12000x12000 pixels" in text and "40 megapixels" in text
    assert seconds < 1.0 and grew < 100


def test_an_hour_of_audio_is_refused_from_its_header(server):
    url, _ = server
    buf = io.BytesIO()
    soundfile.write(buf, np.zeros(3600 * 1000, dtype=np.int16), 1000, format="WAV")  # 7 MB
    status, text = post(url + MODEL + "automatic-speech-recognition", buf.getvalue(), "audio/wav")
    assert status == 413 and "3,600 s long" in text


def test_an_unreadable_image_is_a_400(server):
    url, _ = server
    status, text = post(url + MODEL + "image-classification", b"\x89PNG not really", "image/png")
    assert status == 400 and "could not be read" in text


def stalled(url: str, n: int) -> list[socket.socket]:
    """Connections that send a POST's headers and never its body."""
    port = int(url.rsplit(":", 1)[1])
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        head = f"POST {MODEL}image-classification HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
        s.sendall(head.encode())
        socks.append(s)
    return socks


def test_a_body_that_stalls_is_answered_408_and_closed(server):
    url, _ = server
    socks = stalled(url, 4)
    started = time.monotonic()
    try:
        for s in socks:
            answer = s.recv(4096).decode()
            assert answer.startswith("HTTP/1.1 408")
        assert time.monotonic() - started < 1.0 + 1.0
    finally:
        for s in socks:
            s.close()


def test_connections_beyond_the_limit_are_turned_away_at_once(server):
    url, _ = server
    socks = stalled(url, 8)  # the limit: every one of them holds the server until its body time-out
    try:
        time.sleep(0.2)
        started = time.monotonic()
        status, _ = post(url + MODEL + "image-classification", b"x", "image/png")
        assert status == 503 and time.monotonic() - started < 0.5
    finally:
        for s in socks:
            s.close()


@pytest.fixture(scope="module")
def fair_server() -> Iterator[str]:
    """The server as users start it (64 connections), with stalled bodies held for 30 s."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    with serve_cli(["--body-seconds", "30"], env=env) as url:
        yield url


def post_from(address: str, url: str) -> int:
    """The status of a small bad image POSTed from `address` (each 127.0.0.x is another client)."""
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(address, 0)) as s:
        s.sendall(
            f"POST {MODEL}image-classification HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\n"
            "Content-Length: 1\r\nConnection: close\r\n\r\nx".encode()
        )
        return int(s.recv(4096).decode().split()[1])


def test_one_clients_stalled_uploads_leave_the_others_their_places(fair_server):
    socks = stalled(fair_server, 63)  # from 127.0.0.1: one short of the server's 64 connections
    try:
        time.sleep(0.3)
        refused = 0
        for s in socks[16:]:  # past its share (a quarter) each is answered 503 at once and closed
            s.settimeout(5)
            refused += s.recv(4096).decode().startswith("HTTP/1.1 503")
        started = time.monotonic()
        statuses = [post_from(f"127.0.0.{n}", fair_server) for n in (2, 3, 4)]
        print(f"\n63 stalled uploads from one client: {refused} refused; others got {statuses}")
        assert refused == 47 and statuses == [400, 400, 400]  # before: 503 for every other client
        assert time.monotonic() - started < 3
    finally:
        for s in socks:
            s.close()
