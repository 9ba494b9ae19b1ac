"""Test-wide setup: fully offline, and every temporary file inside the checkout."""

import gc
import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TMP = ROOT / ".tmp"
TMP.mkdir(exist_ok=True)
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
os.environ["TRANSFORMERS_VERBOSITY"] = "error"
os.environ.setdefault("GRADIO_TEMP_DIR", str(TMP / "gradio"))
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
os.environ.setdefault("TMPDIR", str(TMP))
os.environ.setdefault("HUGGINGGPT_CACHE_DIR", str(TMP / "result-cache"))  # CLI runs in subprocesses
tempfile.tempdir = str(TMP)

# No CA certificates: every httpx client reads the whole CA bundle when it is made (about 40 ms of
# CPU), and gradio_client makes one for each file of each streamed chat update it downloads (some
# 45 s of CPU in one full run, measured). The tests speak plain HTTP to 127.0.0.1 only; an empty
# trust store is also one more guard against a test reaching the network over TLS.
NO_CERTS = TMP / "no-certs"
NO_CERTS.mkdir(exist_ok=True)
os.environ.pop("SSL_CERT_FILE", None)  # httpx would read this file first
os.environ["SSL_CERT_DIR"] = str(NO_CERTS)
for key in (
    "OPENAI_API_KEY",
    "HF_TOKEN",
    "HUGGINGGPT_LLM_BASE_URL",
    "HUGGINGGPT_LLM_API_KEY",
    "HUGGINGGPT_EXPERTS_URL",
    "SPACE_ID",
    "GRADIO_SERVER_NAME",
):
    os.environ.pop(key, None)

# One torch thread: the tiny models gain nothing from more, and on a shared 2-core machine idle
# OpenMP threads spinning for work cost twice the CPU.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Session fixtures shared by several modules are registered once, as plugins: a fixture imported
# into two test modules would be built once per module.
pytest_plugins = ["app_support", "experts_support", "serve_support", "tiny_text_audio", "tiny_vision"]

# The inner loop is `pytest -m "not slow"`: no app or browser, no subprocess, no model. CI runs all.
SLOW_MODULES = {
    "test_app",
    "test_browser",
    "test_browser_privacy",
    "test_browser_review",
    "test_browser_estimate",
    "test_browser_live_runs",
    "test_cli",
    "test_cli_plan",
    "test_crash_resume",
    "test_experts",
    "test_experts_catalog",
    "test_browser_experts",
    "test_mcp",
    "test_openai_api",
    "test_replay",
    "test_serve_ray",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        builds_models = any(name.startswith("tiny") for name in getattr(item, "fixturenames", ()))
        if module in SLOW_MODULES or builds_models or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)


_frozen_at = None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Python's cyclic garbage collector walks every object the process holds: once torch,
    transformers, diffusers and gradio are imported that is over half a million, about 0.5 s per full
    collection, and the runtime collects on every model it drops. At the start of each test module,
    what is still alive (modules, classes, session fixtures) is collected once and then frozen out of
    later collections; objects made after that, the tests' own, are collected as before. (Garbage
    cycles among frozen objects are left to the end of the process: memory only, and little.)"""
    global _frozen_at
    module = item.nodeid.split("::", 1)[0]
    if module != _frozen_at:
        _frozen_at = module
        gc.collect()
        gc.freeze()


CHECKOUT_WORKSPACES = ROOT / "workspaces"  # the app's and the CLI's default workdir, from the checkout


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.fixture(autouse=True)
def _writes_only_under_its_own_folders(tmp_path, monkeypatch):
    """Each test runs in its own temporary folder, so a relative path (the default workdir
    `workspaces`, its result cache and learnt estimates) lands there, never in the checkout and never
    where a later test would read it; a test that writes to the checkout's ./workspaces anyway (a
    subprocess started in the checkout without --workdir) fails."""
    before = _listing(CHECKOUT_WORKSPACES)
    monkeypatch.chdir(tmp_path)
    yield
    assert _listing(CHECKOUT_WORKSPACES) == before, "the test wrote to the checkout's ./workspaces"


@pytest.fixture(autouse=True)
def _torch_default_dtype_is_left_alone():
    """Catch a test (or the code under it) that leaves torch's process-wide default dtype changed:
    every later model would silently run in that precision."""
    yield
    torch = sys.modules.get("torch")
    if torch is not None:
        assert torch.get_default_dtype() == torch.float32, "torch's default dtype was left changed"
