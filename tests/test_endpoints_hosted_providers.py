"""HostedEndpoint and the Hub's provider mapping: which hub ids it offers, which provider it calls.

The mapping comes from the card (`catalog refresh`) or from a fake Hub on 127.0.0.1 (HF_ENDPOINT's
constant patched); calls through a provider go to the HF router, which the test guard stops.
"""

from __future__ import annotations

import pytest
from fakes.hf_inference_server import FakeHFServer, loopback_only
from fakes.hub_server import FakeHub, HubModel

from hugginggpt.catalog import Catalog, ModelCard
from hugginggpt.catalog.card import ProviderRoute
from hugginggpt.endpoints import Call, EndpointError, HostedEndpoint, ModelUnavailable


@pytest.fixture
def online():
    with loopback_only():
        yield


@pytest.fixture(scope="module")
def hf():
    with FakeHFServer() as server:
        yield server


def fast(**kw) -> HostedEndpoint:
    return HostedEndpoint(**{"timeout": 5.0, "backoff": 0.01, "retries": 2, **kw})


def route(provider: str, task: str, status: str = "live") -> ProviderRoute:
    return ProviderRoute(provider, status, task)


def test_can_run_follows_the_provider_mapping_on_the_card(online):
    """`catalog refresh` stores which providers serve each model; nothing is asked of the Hub."""
    auto, token = fast(token="hf_test"), {"token": "hf_test"}

    def sd(*routes: ProviderRoute) -> ModelCard:
        return ModelCard(id="acme/sd", task="text-to-image", providers=routes)

    assert auto.can_run(sd(route("fal-ai", "text-to-image", "staging"), route("replicate", "text-to-image")))
    assert not auto.can_run(sd(route("fal-ai", "text-to-image", "staging")))  # staging is for tests only
    assert not auto.can_run(sd(route("fal-ai", "text-to-image", "error")))  # its health check failed
    assert not auto.can_run(sd())  # the Hub lists no provider
    assert not auto.can_run(sd(route("fal-ai", "image-to-image")))  # served, but for another task
    assert fast(provider="replicate", **token).can_run(
        sd(route("fal-ai", "text-to-image"), route("replicate", "text-to-image"))
    )
    assert not fast(provider="novita", **token).can_run(sd(route("fal-ai", "text-to-image")))
    # hf-inference reads the model's pipeline tag: a text2text model takes text-generation calls.
    t5 = ModelCard(
        id="acme/t5", task="text2text-generation", providers=(route("hf-inference", "text2text-generation"),)
    )
    assert auto.can_run(t5)
    # Without a token only hf-inference can be called.
    assert not fast().can_run(sd(route("fal-ai", "text-to-image")))
    assert fast().can_run(
        ModelCard(id="acme/sum", task="summarization", providers=(route("hf-inference", "summarization"),))
    )
    assert not fast(provider="fal-ai").can_run(ModelCard(id="acme/sd", task="text-to-image"))  # no Hub asked


HUB_MODELS = [
    HubModel(
        "acme/served",
        "summarization",
        providers={"hf-inference": {"status": "live", "task": "summarization"}},
    ),
    HubModel("acme/unserved", "summarization"),
    HubModel(
        "acme/painter", "text-to-image", providers={"fal-ai": {"status": "live", "task": "text-to-image"}}
    ),
    HubModel("acme/flaky", "summarization", info_status=500),
]


@pytest.fixture
def hub(online, monkeypatch):
    from huggingface_hub import constants

    with FakeHub(HUB_MODELS) as server:
        monkeypatch.setattr(constants, "ENDPOINT", server.url)
        yield server


def lookups(hub: FakeHub, model_id: str) -> int:
    return sum(r["path"] == f"/api/models/{model_id}" for r in hub.requests)


def test_a_card_without_a_mapping_is_looked_up_once(hub):
    """The shipped catalog has no mapping: the Hub is asked once per model, then the answer is kept."""
    endpoint = fast()
    served, unserved = (
        ModelCard(id="acme/served", task="summarization"),
        ModelCard(id="acme/unserved", task="summarization"),
    )
    assert endpoint.can_run(served) and endpoint.can_run(served)
    assert not endpoint.can_run(unserved)
    assert not endpoint.can_run(ModelCard(id="acme/gone", task="summarization"))  # a 404
    assert (lookups(hub, "acme/served"), lookups(hub, "acme/unserved"), lookups(hub, "acme/gone")) == (
        1,
        1,
        1,
    )
    query = next(r["query"] for r in hub.requests if r["path"] == "/api/models/acme/served")
    assert query["expand"] == ["inferenceProviderMapping"]


def test_selection_skips_the_models_no_provider_serves(hub):
    """Before, with provider auto every model was offered: a task spent its attempts on unserved models."""
    catalog = Catalog(
        [
            ModelCard(id="acme/unserved", task="summarization", downloads=30),
            ModelCard(id="acme/gone", task="summarization", downloads=20),
            ModelCard(id="acme/served", task="summarization", downloads=10),
        ]
    )
    picked = catalog.candidates("summarization", k=2, runnable=fast().can_run)
    assert [c.id for c in picked] == ["acme/served"]


def test_unserved_and_missing_models_are_refused_before_any_request(hub, hf, tmp_path):
    before = len(hf.requests)
    with pytest.raises(ModelUnavailable) as err:
        fast().run(
            "summarization",
            ModelCard(id="acme/unserved", task="summarization"),
            {"text": "a b"},
            Call(out_dir=tmp_path),
        )
    assert str(err.value) == (
        "acme/unserved: no inference provider serves it live for summarization (the Hub lists: none)"
    )
    with pytest.raises(ModelUnavailable, match="acme/gone: not found on the Hub"):
        fast().run(
            "summarization",
            ModelCard(id="acme/gone", task="summarization"),
            {"text": "a b"},
            Call(out_dir=tmp_path),
        )
    with pytest.raises(ModelUnavailable, match="provider fal-ai needs an HF token"):
        fast(provider="fal-ai").run(
            "text-to-image",
            ModelCard(id="acme/painter", task="text-to-image"),
            {"text": "x"},
            Call(out_dir=tmp_path),
        )
    assert len(hf.requests) == before


def test_auto_calls_the_provider_the_mapping_names(hub, tmp_path):
    """The call goes to fal-ai through the HF router, which the test guard stops before it leaves."""
    painter = ModelCard(id="acme/painter", task="text-to-image")
    with pytest.raises(EndpointError, match=r"acme/painter \(fal-ai\): .*test guard") as err:
        fast(token="hf_test").run("text-to-image", painter, {"text": "a red fox"}, Call(out_dir=tmp_path))
    assert not isinstance(err.value, ModelUnavailable)


def test_when_the_hub_cannot_be_reached_the_call_decides_and_it_is_asked_once(online, monkeypatch, caplog):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    endpoint = fast()
    with caplog.at_level("INFO", logger="hugginggpt.endpoints.hosted_routes"):
        assert endpoint.can_run(ModelCard(id="acme/anything", task="summarization"))
        assert endpoint.can_run(ModelCard(id="acme/other", task="summarization"))
    [record] = caplog.records  # one attempt: for a minute no other model waits on a dead Hub
    assert record.getMessage().startswith("the Hub cannot be reached (")


def test_a_hub_error_about_one_model_leaves_it_to_the_call(hub):
    endpoint = fast()
    flaky = ModelCard(id="acme/flaky", task="summarization")
    assert endpoint.can_run(flaky) and endpoint.can_run(flaky)
    assert lookups(hub, "acme/flaky") == 1  # kept for a minute, then asked again
    assert endpoint.can_run(ModelCard(id="acme/served", task="summarization"))  # the Hub still answers


def test_each_call_decides_its_route_once_and_says_why_in_the_same_words(online, tmp_path, monkeypatch):
    """can_run, footprint and run each make the one decision (HostedEndpoint.route) once, from one
    look at the provider book; what run refuses with is the decision's own reason."""
    card = ModelCard(
        id="acme/sd", task="text-to-image", providers=(route("fal-ai", "text-to-image", "error"),)
    )
    endpoint = fast(token="hf_test")
    asked = []
    real = endpoint.providers.served
    monkeypatch.setattr(endpoint.providers, "served", lambda model: asked.append(model.id) or real(model))
    decided = endpoint.route("text-to-image", card)
    assert decided.refusal is not None and decided.route is None
    assert not endpoint.can_run(card) and endpoint.footprint(card).cost_usd is None
    with pytest.raises(ModelUnavailable) as err:
        endpoint.run("text-to-image", card, {"text": "x"}, Call(out_dir=tmp_path))
    assert str(err.value) == decided.refusal
    assert asked == ["acme/sd"] * 4  # route, can_run, footprint, run: one look each
    priced = ModelCard(
        id="acme/sd",
        task="text-to-image",
        providers=(ProviderRoute("fal-ai", "live", "text-to-image", 0.02),),
    )
    assert endpoint.route("text-to-image", priced).route == priced.providers[0]
    assert endpoint.can_run(priced) and endpoint.footprint(priced).cost_usd == 0.02
