"""Estimates before a run (estimate.py) and the user's limits on the models a request may use
(limits.py): real folders of tiny models, a fake Hub on 127.0.0.1 with known file sizes, whole
requests through the pipeline against the fake LLM server."""

import io
import json
from pathlib import Path

import pytest
from fakes.endpoints import SizedEndpoint
from fakes.hf_inference_server import loopback_only
from fakes.hub_server import FakeHub, HubModel
from fakes.llm_server import FakeLLMServer

import models_local
from hugginggpt.catalog import Catalog, ModelCard
from hugginggpt.commands.cli import main
from hugginggpt.config import Settings, load_settings
from hugginggpt.costs.estimate import Estimator
from hugginggpt.endpoints import Call, LocalEndpoint
from hugginggpt.files.workspace import Workspace
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.run.events import Done, ErrorKind, Outcome, PickSource
from hugginggpt.run.pipeline import Pipeline
from models_local.sizing import folder_size

GB = 10**9


def card(model_id: str, task: str, downloads: int, licence: str = "mit") -> ModelCard:
    return ModelCard(id=model_id, task=task, downloads=downloads, license=licence)


CATALOG = Catalog(
    [
        card("draw/huge", "text-to-image", 900, "openrail"),
        card("draw/big", "text-to-image", 800),
        card("draw/small", "text-to-image", 700, "apache-2.0"),
        card("read/only", "image-to-text", 100),
    ]
)
SIZES = {
    "draw/huge": (5 * GB, 5 * GB),
    "draw/big": (int(2.1 * GB), 0),  # already downloaded
    "draw/small": (GB // 2, GB // 2),
    "read/only": (GB // 10, GB // 10),
}
PLAN = json.dumps(
    {
        "tasks": [
            {"task": "text-to-image", "id": 0, "dep": [-1], "args": {"text": "a cat"}},
            {"task": "image-to-text", "id": 1, "dep": [0], "args": {"image": "<resource>-0"}},
        ]
    }
)


@pytest.fixture
def server():
    with FakeLLMServer() as s:
        yield s


def pipeline(server, tmp_path, endpoint=None, **settings) -> Pipeline:
    llm = OpenAICompatibleLLM(base_url=server.url, model="fake", api_key="sk-x", timeout=5, max_retries=0)
    return Pipeline(
        llm=llm,
        catalog=CATALOG,
        endpoint=endpoint or SizedEndpoint(sizes=SIZES),
        settings=Settings(workdir=str(tmp_path / "work"), **settings),
    )


def run(p: Pipeline, tmp_path, *, plan_only: bool = False) -> Done:
    start = p.plan_only if plan_only else p.run
    events = list(start("draw a cat and describe it", workspace=Workspace(tmp_path / "conv")))
    assert isinstance(events[-1], Done)
    return events[-1]


# ---- estimates ----------------------------------------------------------------------------------


def test_a_model_in_a_local_folder_downloads_nothing_and_is_sized_from_its_files(tiny, tmp_path):
    folder = tiny("bert-classifier")
    model = ModelCard(id="tiny/cls", task="text-classification", path=folder, library="transformers")
    estimate = Estimator(tmp_path / "est").estimate(LocalEndpoint(), model)
    assert estimate.download_bytes == 0 and estimate.where.startswith("local:cpu")
    assert estimate.memory_bytes == folder_size(Path(folder), half=False) > 0
    assert estimate.runs == 0 and estimate.seconds is not None and estimate.seconds > 0  # the prior
    assert estimate.cost_usd is None


def test_calls_that_find_the_model_loaded_are_learnt_apart_from_first_calls(tiny, tmp_path):
    folder = tiny("bert-classifier")
    model = ModelCard(id="tiny/cls-warm", task="text-classification", path=folder, library="transformers")
    endpoint, estimator = LocalEndpoint(), Estimator(tmp_path / "est")
    models_local.default_runtime().drop(folder)  # other tests of the session may have loaded it
    first = estimator.estimate(endpoint, model)
    assert first.where == "local:cpu"
    estimator.times.add(model.id, model.task, first.where, 0.5)  # a first call: it loaded the model
    endpoint.run(model.task, model, {"text": "a good cat"}, Call(out_dir=tmp_path / "out"))
    warm = estimator.estimate(endpoint, model)
    assert warm.where == "local:cpu loaded" and warm.seconds == 0.5  # bounded by the first calls
    estimator.times.add(model.id, model.task, warm.where, 0.01)
    assert estimator.estimate(endpoint, model).seconds == 0.01
    assert estimator.estimate(endpoint, model).runs == 1


def test_a_model_not_downloaded_is_sized_from_the_hub_once_and_the_size_is_kept(tmp_path):
    files = {
        "model.safetensors": 3_000_000,
        "pytorch_model.bin": 6_000_000,  # a second copy of the weights: not downloaded
        "tf_model.h5": 9_000_000,  # another framework's: not downloaded
        "config.json": 700,
    }
    hub_model = HubModel("acme/unseen", "text-classification", card_data={"license": "mit"}, files=files)
    model = ModelCard(id="acme/unseen", task="text-classification", library="transformers", local=True)
    with loopback_only(), FakeHub([hub_model]) as hub:
        from huggingface_hub import constants

        before, constants.ENDPOINT = constants.ENDPOINT, hub.url
        try:
            estimate = Estimator(tmp_path / "est").estimate(LocalEndpoint(), model)
            again = Estimator(tmp_path / "est").estimate(LocalEndpoint(), model)  # a new process, say
        finally:
            constants.ENDPOINT = before
        asked = [r for r in hub.requests if r["path"] == "/api/models/acme/unseen"]
    assert estimate.download_bytes == 3_000_000 and estimate.memory_bytes == 3_000_000
    assert again == estimate and len(asked) == 1  # kept in the work folder
    kept = json.loads((tmp_path / "est" / "facts.json").read_text())
    assert kept["acme/unseen"] == {"size_bytes": 3_000_000, "license": "mit"}


def test_seconds_are_learnt_from_this_machines_runs(server, tmp_path):
    endpoint = SizedEndpoint(sizes=SIZES, durations={"draw/big": 0.2, "read/only": 0.05})
    p = pipeline(server, tmp_path, endpoint)
    first = None
    for durations in ({"draw/big": 0.2}, {"draw/big": 0.4}):
        endpoint.durations.update(durations)
        server.reset()
        server.script("plan", PLAN).script("select", '{"0": {"id": "draw/big", "reason": "fine"}}')
        server.script("respond", "Done.")
        done = run(p, tmp_path)
        assert done.ok, done.error
        first = first or done
    prior = first.choices[0].estimate
    assert prior is not None and prior.runs == 0  # nothing had run here yet
    rows = {r["id"]: r for r in first.trace["estimates"]}  # estimate and actual side by side
    assert rows[0]["estimated_seconds"] == round(prior.seconds, 3) and rows[0]["seconds"] >= 0.2
    server.reset()
    server.script("plan", PLAN).script("select", '{"0": {"id": "draw/big", "reason": "fine"}}')
    learnt = run(p, tmp_path, plan_only=True).choices[0].estimate
    assert learnt is not None and learnt.runs == 2
    assert 0.29 <= learnt.seconds <= 0.35  # the median of about 0.2 s and 0.4 s


# ---- limits -------------------------------------------------------------------------------------


def test_the_model_size_limit_leaves_out_larger_candidates_and_says_why(server, tmp_path):
    server.script("plan", PLAN).script("select", '{"0": {"id": "draw/small", "reason": "small"}}')
    done = run(pipeline(server, tmp_path, max_model_gb=1.0), tmp_path, plan_only=True)
    assert done.ok, done.error
    choice = done.choices[0]
    assert choice.model.id == "draw/small" and [m.id for m in choice.candidates] == ["draw/small"]
    assert [(e["id"], e["why"]) for e in choice.to_json()["excluded"]] == [
        ("draw/huge", "it is 5 GB, over the 1 GB model limit"),
        ("draw/big", "it is 2.1 GB, over the 1 GB model limit"),
    ]
    assert choice.to_json()["estimate"]["download_bytes"] == GB // 2


def test_the_licence_limit_leaves_out_other_licences(server, tmp_path):
    server.script("plan", PLAN).script("select", '{"0": {"id": "draw/big", "reason": "ok"}}')
    done = run(pipeline(server, tmp_path, licenses=("mit", "apache-2.0")), tmp_path, plan_only=True)
    choice = done.choices[0]
    assert [m.id for m in choice.candidates] == ["draw/big", "draw/small"] and choice.model.id == "draw/big"
    assert [(e.id, e.why) for e in choice.excluded] == [
        ("draw/huge", "its licence openrail is not allowed (apache-2.0, mit)")
    ]


def test_the_download_limit_counts_what_is_not_here_yet(server, tmp_path):
    """draw/big is larger but already downloaded: it fits a 1 GB download limit, draw/huge does not."""
    server.script("plan", PLAN).script("select", '{"0": {"id": "draw/big", "reason": "ok"}}')
    done = run(pipeline(server, tmp_path, max_download_gb=1.0), tmp_path, plan_only=True)
    choice = done.choices[0]
    assert choice.model.id == "draw/big" and choice.source is PickSource.LLM
    assert [(e.id, e.why) for e in choice.excluded] == [
        ("draw/huge", "it downloads 5 GB, over the 1 GB limit")
    ]


def test_the_request_total_download_swaps_a_pick_for_a_smaller_one_and_says_so(server, tmp_path):
    sizes = {**SIZES, "draw/big": (int(0.8 * GB), int(0.8 * GB)), "read/only": (GB // 2, GB // 2)}
    server.script("plan", PLAN).script("select", '{"0": {"id": "draw/big", "reason": "prettier"}}')
    p = pipeline(server, tmp_path, SizedEndpoint(sizes=sizes), max_download_gb=1.0)
    choice = run(p, tmp_path, plan_only=True).choices[0]
    assert choice.model.id == "draw/small" and choice.source is PickSource.LIMIT
    assert choice.reason == (
        "draw/small instead of draw/big: the request's downloads would be 1.3 GB, over the 1 GB limit"
    )


def test_a_pick_left_out_by_a_limit_falls_back_to_the_best_that_fits(server, tmp_path):
    server.script("plan", PLAN).script("select", '{"0": {"id": "draw/huge", "reason": "biggest"}}')
    choice = run(pipeline(server, tmp_path, max_model_gb=3.0), tmp_path, plan_only=True).choices[0]
    assert choice.model.id == "draw/big"
    assert choice.reason == (
        "the LLM picked draw/huge, but it is 5 GB, over the 3 GB model limit; "
        "using the best candidate that fits"
    )


def test_a_request_no_model_fits_is_refused_before_any_model_runs(server, tmp_path):
    server.script("plan", PLAN).script("respond", "never asked")
    endpoint = SizedEndpoint(sizes=SIZES)
    done = run(pipeline(server, tmp_path, endpoint, max_model_gb=0.4), tmp_path)
    assert done.outcome is Outcome.FAILED and done.error_kind is ErrorKind.LIMIT
    assert done.error == (
        "No model fits your limits: text-to-image: the smallest candidate is 500 MB; the limit is 400 MB "
        "(--max-model-gb 0.5 would let it run)."
    )
    assert endpoint.calls == [] and server.stages() == ["plan"]  # no model ran, no selection call


def test_limits_come_from_the_environment_and_the_command_line(server, tiny, tmp_path):
    settings = load_settings(
        environ={"HUGGINGGPT_MAX_MODEL_GB": "2.5", "HUGGINGGPT_LICENSES": "mit, apache-2.0"}
    )
    assert settings.max_model_gb == 2.5 and settings.licenses == ("mit", "apache-2.0")
    folder = tiny("bert-classifier")
    entry = {
        "id": "tiny/cls",
        "task": "text-classification",
        "path": folder,
        "license": "mit",
        "downloads": 10**12,
    }
    (tmp_path / "mine.jsonl").write_text(json.dumps(entry) + "\n")
    plan = [{"task": "text-classification", "id": 0, "dep": [-1], "args": {"text": "a good cat"}}]
    args = ["--llm-base-url", server.url, "--llm-model", "fake", "--llm-api-key", "sk-x"]
    args += [
        "--inference",
        "local",
        "--catalog",
        str(tmp_path / "mine.jsonl"),
        "--workdir",
        str(tmp_path / "ws"),
    ]

    def cli(*more: str) -> tuple[int, str, str]:
        server.reset()
        server.script("plan", json.dumps({"tasks": plan}))
        out, err = io.StringIO(), io.StringIO()
        code = main([*args, *more, "label this"], stdout=out, stderr=err, stdin=io.StringIO())
        return code, out.getvalue(), err.getvalue()

    code, out, err = cli("--plan-only", "--json", "--licenses", "mit,apache-2.0")
    assert code == 0, err
    estimate = json.loads(out)["choices"]["0"]["estimate"]
    assert estimate["download_bytes"] == 0 and estimate["memory_bytes"] == folder_size(
        Path(folder), half=False
    )
    assert set(estimate) >= {"download_bytes", "memory_bytes", "seconds", "cost_usd"}
    code, out, err = cli("--plan-only")
    assert code == 0 and "    estimate: download 0 B, memory " in out
    code, out, err = cli("--plan-only", "--licenses", "wtfpl")
    assert code == 1 and "text-classification: no candidate has an allowed licence (wtfpl)" in err
    assert "allowing mit would let tiny/cls run" in err


def test_catalog_refresh_stores_the_size_the_runtime_downloads_and_the_licence(tmp_path):
    from hugginggpt.catalog.__main__ import main as catalog_main

    files = {"model.safetensors": 4_000_000, "model.fp16.safetensors": 2_000_000, "config.json": 500}
    models = [
        HubModel("acme/sum", "summarization", downloads=9, card_data={"license": "apache-2.0"}, files=files),
        HubModel("acme/bare", "summarization", downloads=1),  # no listing: size and licence stay unknown
    ]
    out = tmp_path / "refreshed.jsonl"
    with loopback_only(), FakeHub(models) as hub:
        from huggingface_hub import constants

        before, constants.ENDPOINT = constants.ENDPOINT, hub.url
        try:
            code = catalog_main(["refresh", "--task", "summarization", "--quiet", "--out", str(out)])
        finally:
            constants.ENDPOINT = before
    assert code == 0
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["acme/sum"]["size_bytes"] == 4_000_000 and rows["acme/sum"]["license"] == "apache-2.0"
    assert "size_bytes" not in rows["acme/bare"] and "license" not in rows["acme/bare"]


def test_a_visitor_may_tighten_the_servers_limits_but_not_loosen_them():
    from webui.host.session_settings import LLMChoice, merge_settings

    server = Settings(max_model_gb=4.0, licenses=("mit", "apache-2.0"))
    tighter = merge_settings(server, LLMChoice(max_model_gb=1.0, licenses="mit"), public=True)
    assert tighter.max_model_gb == 1.0 and tighter.licenses == ("mit",)
    looser = merge_settings(
        server, LLMChoice(max_model_gb=40.0, max_download_gb=2, licenses="gpl-3.0"), public=True
    )
    assert looser.max_model_gb == 4.0 and looser.max_download_gb == 2.0 and looser.licenses == ("(none)",)


def test_a_hosted_call_costs_what_its_providers_price_says(tmp_path):
    from hugginggpt.catalog.card import ProviderRoute
    from hugginggpt.endpoints import HostedEndpoint

    priced = ProviderRoute("hf-inference", "live", "summarization", price_usd=0.002)
    model = ModelCard(id="acme/sum", task="summarization", providers=(priced,))
    estimate = Estimator(tmp_path / "est").estimate(HostedEndpoint(token=None), model)
    assert (estimate.where, estimate.download_bytes, estimate.memory_bytes) == ("hosted", 0, 0)
    assert estimate.cost_usd == 0.002
    unpriced = ModelCard(
        id="acme/sum2",
        task="summarization",
        providers=(ProviderRoute("hf-inference", "live", "summarization"),),
    )
    assert Estimator(tmp_path / "est").estimate(HostedEndpoint(token=None), unpriced).cost_usd is None


def test_a_user_catalog_entry_may_price_a_provider(tmp_path):
    from hugginggpt.catalog import load_catalog

    route = {"provider": "fal-ai", "status": "live", "task": "text-to-image", "price_usd": 0.01}
    bad = {**route, "price_usd": "cheap"}
    lines = [
        {"id": "acme/paint", "task": "text-to-image", "providers": [route]},
        {"id": "acme/paint2", "task": "text-to-image", "providers": [bad]},
    ]
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    catalog = load_catalog([tmp_path / "mine.jsonl"], shipped=None)
    assert catalog.get("acme/paint").providers[0].price_usd == 0.01
    assert catalog.get("acme/paint2") is None and "price_usd: a number" in catalog.problems[0]


def test_under_a_limit_the_plan_streams_and_no_task_starts_before_the_whole_plan_is_screened(
    server, tmp_path
):
    """One task graph whatever the limits: with one set, the tasks arrive as the plan streams, and
    the graph holds their start until the whole plan's picks are screened (here a swap)."""
    sizes = {**SIZES, "draw/big": (int(0.8 * GB), int(0.8 * GB)), "read/only": (GB // 2, GB // 2)}
    server.script("plan", PLAN).script("select", '{"0": {"id": "draw/big", "reason": "prettier"}}')
    server.script("respond", "a cat, described")
    endpoint = SizedEndpoint(sizes=sizes)
    done = run(pipeline(server, tmp_path, endpoint, max_download_gb=1.0), tmp_path)
    assert done.ok, done.error
    assert [c[1] for c in endpoint.calls] == ["draw/small", "read/only"]  # the swapped pick ran
    streamed = done.trace["plan_stream"]["tasks"]  # the streaming run's, as without a limit
    assert [t["id"] for t in streamed] == [0, 1]
    assert min(t["started"] for t in streamed) >= done.trace["timings"]["plan"]
