"""The result cache: keys, entries, the byte budget under concurrent writers, and whole requests
served from it (a counting fake endpoint, and a tiny local model that is not even loaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fakes.endpoints import FakeEndpoint, cards
from fakes.llm_server import FakeLLMServer

import models_local
from hugginggpt.catalog import Catalog, ModelCard
from hugginggpt.config import Settings
from hugginggpt.endpoints import Call, LocalEndpoint
from hugginggpt.files.artifacts import Artifact
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.run.cache import CachingEndpoint, ResultCache
from hugginggpt.run.events import TaskFinished
from hugginggpt.run.pipeline import Pipeline
from hugginggpt.run.steps import collect

ROOT = Path(__file__).resolve().parent.parent
MODEL = ModelCard(id="acme/m", task="image-to-text")


def key(cache: ResultCache, scope: str = "s", model: ModelCard = MODEL, **inputs) -> str:
    return cache.key(scope=scope, endpoint="fake", task="image-to-text", model=model, inputs=inputs)


def test_files_are_keyed_by_content_not_name_and_every_part_of_the_key_counts(tmp_path):
    cache = ResultCache(tmp_path / "cache", 10**6)
    a, b, c = tmp_path / "a.png", tmp_path / "b.png", tmp_path / "c.png"
    a.write_bytes(b"same bytes")
    b.write_bytes(b"same bytes")
    c.write_bytes(b"other bytes")
    assert key(cache, image=a) == key(cache, image=b)
    assert key(cache, image=a) != key(cache, image=c)
    assert key(cache, image=a, seed=1) != key(cache, image=a, seed=2)
    assert key(cache, image=a) != key(cache, "another conversation", image=a)
    assert key(cache, image=a) != key(cache, model=ModelCard(id="acme/other", task="image-to-text"), image=a)


def test_a_local_folder_model_is_keyed_by_its_content(tmp_path):
    cache = ResultCache(tmp_path / "cache", 10**6)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"v1")
    card = ModelCard(id="mine", task="image-to-text", path=str(folder))
    first = key(cache, model=card, text="x")
    assert key(cache, model=card, text="x") == first
    (folder / "weights.bin").write_bytes(b"v2")  # retrained in place: old results must not be served
    os.utime(folder / "weights.bin", ns=(1, 1))
    assert key(cache, model=card, text="x") != first
    # the folder's hash is kept on disk, for the next process
    assert any((tmp_path / "cache" / "folders").iterdir())


def test_an_entry_gives_back_values_and_copies_of_files_under_their_names(tmp_path):
    cache = ResultCache(tmp_path / "cache", 10**6)
    made = tmp_path / "run1" / "a1b2.png"
    made.parent.mkdir()
    made.write_bytes(b"\x89PNG image")
    assert cache.get("k", tmp_path / "run2") is None
    assert cache.put("k", [Artifact("image", path=made), Artifact("data", value={"n": [1, 2]})])
    served = cache.get("k", tmp_path / "run2")
    assert (
        served[0].path == tmp_path / "run2" / "a1b2.png" and served[0].path.read_bytes() == b"\x89PNG image"
    )
    assert served[1] == Artifact("data", value={"n": [1, 2]})
    again = cache.get("k", tmp_path / "run2")  # the name is taken in that folder now
    assert again[0].path.name == "a1b2-2.png"


def test_least_recently_used_entries_go_first_and_an_oversized_result_is_not_kept(tmp_path):
    cache = ResultCache(tmp_path / "cache", 2500)
    for name in ("a", "b"):
        cache.put(name, [Artifact("text", value="x" * 1000)])
    assert cache.get("a", tmp_path / "out") is not None  # a is now more recent than b
    cache.put("c", [Artifact("text", value="y" * 1000)])
    assert cache.get("b", tmp_path / "out") is None
    assert cache.get("a", tmp_path / "out") is not None and cache.get("c", tmp_path / "out") is not None
    assert cache.size() <= 2500
    assert not cache.put("huge", [Artifact("text", value="z" * 5000)]) and len(cache) == 2


def test_a_damaged_entry_is_a_miss_and_goes(tmp_path):
    cache = ResultCache(tmp_path / "cache", 10**6)
    cache.put("k", [Artifact("text", value="fine")])
    (tmp_path / "cache" / "entries" / "k" / "meta.json").write_text("{not json")
    assert cache.get("k", tmp_path / "out") is None
    assert not (tmp_path / "cache" / "entries" / "k").exists()


WRITER = """
import sys
from pathlib import Path
from hugginggpt.files.artifacts import Artifact
from hugginggpt.run.cache import ResultCache

root, budget, prefix, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
cache = ResultCache(Path(root), budget)  # its own object, as separate pipelines and processes have
for i in range(n):
    cache.put(f"{prefix}-{i}", [Artifact("text", value="v" * (100 + 37 * (i % 9)))])
"""


def test_the_budget_holds_under_concurrent_writers_threads_and_processes(tmp_path):
    root, budget = tmp_path / "cache", 1500
    args = [str(root), str(budget)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [
        subprocess.Popen([sys.executable, "-c", WRITER, *args, f"p{i}", "40"], env=env) for i in range(2)
    ]
    sizes: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        watcher = ResultCache(root, budget)
        while not stop.is_set():
            sizes.append(watcher.size())

    def write(prefix: str) -> None:  # what WRITER does, in a thread
        cache = ResultCache(root, budget)
        for i in range(30):
            cache.put(f"{prefix}-{i}", [Artifact("text", value="v" * (100 + 37 * (i % 9)))])

    threads = [
        threading.Thread(target=watch),
        *(threading.Thread(target=write, args=(f"t{i}",)) for i in range(6)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads[1:]:
        thread.join(timeout=60)
    codes = [p.wait(timeout=60) for p in processes]
    stop.set()
    threads[0].join()
    assert codes == [0, 0]
    assert len(sizes) > 10 and max(sizes) <= budget
    assert 0 < ResultCache(root, budget).size() <= budget
    assert not any((root / "staging").iterdir())  # nothing half-written is left


def test_caching_endpoint_serves_a_hit_without_calling_the_model(tmp_path):
    inner = FakeEndpoint()
    endpoint = CachingEndpoint(inner, ResultCache(tmp_path / "cache", 10**6), scope="s")
    ws = Workspace(tmp_path / "conv")
    (tmp_path / "cat.png").write_bytes(b"png")
    photo = ws.add_upload(tmp_path / "cat.png")
    first = endpoint.run("image-to-text", MODEL, {"image": photo}, Call(out_dir=ws.run_dir("r1") / "task-0"))
    second = endpoint.run("image-to-text", MODEL, {"image": photo}, Call(out_dir=ws.run_dir("r2") / "task-0"))
    assert len(inner.calls) == 1 and (first.answered_by, first.cached) == ("fake", False)
    assert (second.answered_by, second.cached) == ("cache", True) and second.outputs == first.outputs


# ---- whole requests ---------------------------------------------------------------------------

PLAN = json.dumps(
    {
        "tasks": [
            {"task": "image-to-text", "id": 0, "dep": [-1], "args": {"image": "photo.png"}},
            {"task": "text-to-image", "id": 1, "dep": [0], "args": {"text": "<resource>-0"}},
        ]
    }
)
CATALOG = Catalog(cards(("cap", "image-to-text", 10), ("draw", "text-to-image", 10)))


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        s.script("plan", PLAN).script("respond", "Done.")
        yield s


@pytest.fixture
def photo(tmp_path):
    path = tmp_path / "photo.png"
    path.write_bytes(b"\x89PNG photo")
    return path


def pipeline(server, endpoint, cache, **settings):
    llm = OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="sk-x", timeout=5, max_retries=0)
    return Pipeline(llm=llm, catalog=CATALOG, endpoint=endpoint, settings=Settings(**settings), cache=cache)


def test_the_same_request_twice_in_one_workspace_runs_no_model_the_second_time(server, photo, tmp_path):
    endpoint = FakeEndpoint()
    p = pipeline(server, endpoint, ResultCache(tmp_path / "cache", 10**7))
    ws = Workspace(tmp_path / "conv")
    first = list(p.run("caption and draw", workspace=ws, files=[photo]))
    assert len(endpoint.calls) == 2 and not any(r.cached for r in first[-1].records)
    second = list(p.run("caption and draw", workspace=ws))
    done = second[-1]
    assert done.ok and len(endpoint.calls) == 2  # nothing ran
    assert [r.cached for r in done.records] == [True, True]
    assert all(e.cached for e in second if isinstance(e, TaskFinished))
    assert [t["cached"] for t in done.trace["tasks"]] == [True, True]
    image = done.records[1].outputs[0].path  # a copy in this run's own folder
    assert image.is_file() and done.trace["request_id"] in str(image)
    assert done.records[0].outputs[0].value == first[-1].records[0].outputs[0].value


def test_conversation_scope_keeps_conversations_apart_and_process_scope_shares(server, photo, tmp_path):
    cache = ResultCache(tmp_path / "cache", 10**7)
    for scope, calls_after_second in (("conversation", 4), ("process", 2)):
        endpoint = FakeEndpoint()
        p = pipeline(server, endpoint, cache, cache_scope=scope)
        for visitor in ("alice", "bob"):
            list(p.run("caption and draw", workspace=Workspace(tmp_path / scope / visitor), files=[photo]))
        assert len(endpoint.calls) == calls_after_second, scope


def test_one_stack_serves_every_run_and_each_call_says_its_scope(server, photo, tmp_path, monkeypatch):
    """The cache and the observer wrap the endpoint once, in the Pipeline; a run's scope (and a replay's
    "not cached") travels in each Call, so runs of two conversations share the stack, not entries."""
    made, scopes = [], []
    real_init, real_run = CachingEndpoint.__init__, FakeEndpoint.run
    monkeypatch.setattr(
        CachingEndpoint, "__init__", lambda self, *a, **k: made.append(1) or real_init(self, *a, **k)
    )
    monkeypatch.setattr(
        FakeEndpoint, "run", lambda self, *a: scopes.append(a[3].cache_scope) or real_run(self, *a)
    )
    endpoint = FakeEndpoint()
    p = pipeline(server, endpoint, ResultCache(tmp_path / "cache", 10**7))
    stack = p.stack
    alice, bob = Workspace(tmp_path / "alice"), Workspace(tmp_path / "bob")
    first = collect(p.run("caption and draw", workspace=alice, files=[photo]))
    collect(p.run("caption and draw", workspace=bob, files=[photo]))
    again = collect(p.run("caption and draw", workspace=alice))
    assert [r.cached for r in again.records] == [True, True]
    replayed = collect(p.run_plan("caption and draw", first.plan, workspace=alice, use_cache=False))
    assert [r.cached for r in replayed.records] == [False, False]
    assert made == [1] and p.stack is stack
    assert scopes == [str(alice.root)] * 2 + [str(bob.root)] * 2 + [None] * 2


def test_failures_are_not_cached(server, photo, tmp_path):
    endpoint = FakeEndpoint(failing={"cap"})
    p = pipeline(server, endpoint, ResultCache(tmp_path / "cache", 10**7), task_attempts=1)
    ws = Workspace(tmp_path / "conv")
    list(p.run("caption and draw", workspace=ws, files=[photo]))
    endpoint.failing.clear()
    done = collect(p.run("caption and draw", workspace=ws))
    assert [r.cached for r in done.records] == [False, False] and len(endpoint.calls) == 3


def test_a_tiny_local_model_is_not_even_loaded_for_a_cached_task(tiny, tmp_path):
    catalog = Catalog(
        [ModelCard(id="tiny/cls", task="text-classification", path=tiny("bert-classifier"), local=True)]
    )
    plan = json.dumps({"tasks": [{"task": "text-classification", "id": 0, "args": {"text": "a good cat"}}]})
    ws = Workspace(tmp_path / "conv")
    with FakeLLMServer() as server:
        server.script("plan", plan).script("respond", "ok")
        llm = OpenAICompatibleLLM(base_url=server.url, model="f", api_key="k", timeout=5, max_retries=0)
        p = Pipeline(
            llm=llm, catalog=catalog, endpoint=LocalEndpoint(), cache=ResultCache(tmp_path / "cache", 10**7)
        )
        try:
            models_local.configure()  # a fresh runtime: nothing loaded, loads counted from 0
            first = collect(p.run("classify", workspace=ws))
            assert models_local.default_runtime().loads == 1
            models_local.configure()
            second = collect(p.run("classify", workspace=ws))
            assert models_local.default_runtime().loads == 0  # served without loading the model
        finally:
            models_local.configure()
    assert second.records[0].cached and second.records[0].outputs == first.records[0].outputs


def test_cache_settings_are_read_and_checked(tmp_path):
    from hugginggpt.config import load_settings
    from hugginggpt.factory import build_cache

    env = {"HUGGINGGPT_CACHE_SCOPE": "process", "HUGGINGGPT_CACHE_MAX_BYTES": "1000", "HUGGINGGPT_SEED": "9"}
    settings = load_settings(environ={**env, "HUGGINGGPT_CACHE_DIR": str(tmp_path / "c")})
    assert (settings.cache_scope, settings.cache_max_bytes, settings.seed) == ("process", 1000, 9)
    assert build_cache(settings).root == (tmp_path / "c").resolve()
    assert build_cache(Settings(workdir=str(tmp_path / "w"))).root == (tmp_path / "w" / ".cache").resolve()
    assert build_cache(Settings(cache_max_bytes=0)) is None
    for bad in ({"cache_scope": "everyone"}, {"cache_max_bytes": -1}, {"seed": -3}):
        with pytest.raises(ValueError):
            Settings(**bad)
