"""Routing between backends (local, hosted, hybrid) and the local endpoint over models_local."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from fakes.hf_inference_server import FakeHFServer, loopback_only

from hugginggpt.catalog import ModelCard
from hugginggpt.costs.limits import Limits, why_not
from hugginggpt.endpoints import (
    Call,
    Endpoint,
    EndpointError,
    HostedEndpoint,
    LocalEndpoint,
    ModelUnavailable,
    Result,
    RoutedEndpoint,
    Stopped,
    build_endpoint,
)
from hugginggpt.endpoints.base import Footprint
from hugginggpt.files.artifacts import Artifact

CARD = ModelCard(id="acme/model", task="summarization")


class Recording(Endpoint):
    """A backend that records what it was asked and answers, refuses or fails as told."""

    def __init__(self, name: str, *, runnable: bool = True, error: Exception | None = None) -> None:
        self.name = name
        self.runnable = runnable
        self.error = error
        self.calls: list[tuple[str, Any]] = []

    def can_run(self, model: ModelCard) -> bool:
        self.calls.append(("can_run", model.id))
        return self.runnable

    def run(self, task: str, model: ModelCard, inputs: dict[str, Any], call: Call) -> Result:
        self.calls.append(("run", task, model.id, dict(inputs)))
        if self.error is not None:
            raise self.error
        return Result(outputs=[Artifact("text", value=f"from {self.name}")], answered_by=self.name)

    def runs(self) -> int:
        return sum(c[0] == "run" for c in self.calls)


def routed(policy: str, local: Recording, hosted: Recording) -> RoutedEndpoint:
    return RoutedEndpoint(policy, {"local": local, "hosted": hosted})


def test_hybrid_runs_local_first_and_stops_there(tmp_path):
    local, hosted = Recording("local"), Recording("hosted")
    arts = (
        routed("hybrid", local, hosted)
        .run("summarization", CARD, {"text": "x"}, Call(out_dir=tmp_path))
        .outputs
    )
    assert arts == [Artifact("text", value="from local")]
    assert local.calls[-1] == ("run", "summarization", "acme/model", {"text": "x"})
    assert hosted.calls == []


def test_hybrid_goes_hosted_when_local_cannot_run_the_model(tmp_path):
    local, hosted = Recording("local", runnable=False), Recording("hosted")
    arts = (
        routed("hybrid", local, hosted)
        .run("summarization", CARD, {"text": "x"}, Call(out_dir=tmp_path))
        .outputs
    )
    assert arts == [Artifact("text", value="from hosted")]
    assert local.runs() == 0 and hosted.runs() == 1


@pytest.mark.parametrize(
    "error",
    [
        ModelUnavailable("too large for the budget"),
        EndpointError("CUDA out of memory"),
        RuntimeError("a bug"),
    ],
)
def test_hybrid_falls_back_to_hosted_when_local_refuses_or_fails(tmp_path, error):
    local, hosted = Recording("local", error=error), Recording("hosted")
    arts = (
        routed("hybrid", local, hosted)
        .run("summarization", CARD, {"text": "x"}, Call(out_dir=tmp_path))
        .outputs
    )
    assert arts == [Artifact("text", value="from hosted")]
    assert local.runs() == 1 and hosted.runs() == 1


def test_hybrid_reports_both_failures(tmp_path):
    local = Recording("local", error=EndpointError("out of memory"))
    hosted = Recording("hosted", error=EndpointError("HTTP 503 loading"))
    with pytest.raises(EndpointError) as err:
        routed("hybrid", local, hosted).run("summarization", CARD, {"text": "x"}, Call(out_dir=tmp_path))
    assert not isinstance(err.value, ModelUnavailable)  # it could run, it failed
    assert str(err.value) == "local: out of memory; hosted: HTTP 503 loading"


def test_hybrid_unavailable_when_no_backend_can_run(tmp_path):
    local = Recording("local", runnable=False)
    hosted = Recording("hosted", error=ModelUnavailable("HTTP 404"))
    with pytest.raises(ModelUnavailable, match="local: cannot run acme/model; hosted: HTTP 404"):
        routed("hybrid", local, hosted).run("summarization", CARD, {"text": "x"}, Call(out_dir=tmp_path))


def test_hybrid_does_not_fall_back_once_stopped(tmp_path):
    """A local call ended by Stop must not start the same task again on hosted inference."""
    stop = threading.Event()
    local, hosted = Recording("local", error=Stopped("acme/model: stopped")), Recording("hosted")
    local_run = local.run

    def run_then_stop(*args, **kwargs):
        stop.set()  # Stop is pressed while the local call runs
        return local_run(*args, **kwargs)

    local.run = run_then_stop
    with pytest.raises(Stopped, match="acme/model: stopped"):
        routed("hybrid", local, hosted).run(
            "summarization", CARD, {"text": "x"}, Call(out_dir=tmp_path, stop=stop)
        )
    assert hosted.runs() == 0


def test_local_endpoint_reports_a_stopped_run(tmp_path, monkeypatch):
    import models_local

    def stopped_run(task, model, inputs, out_dir, *, stop=None, progress=None):
        assert stop is marker  # the signal reaches the runtime
        raise models_local.Stopped("stopped")

    marker = threading.Event()
    monkeypatch.setattr(models_local, "run", stopped_run)
    with pytest.raises(Stopped, match="acme/model: stopped") as caught:
        LocalEndpoint().run("summarization", CARD, {"text": "x"}, Call(out_dir=tmp_path, stop=marker))
    assert not isinstance(caught.value, ModelUnavailable)  # a stop is not "cannot run this model"


def test_local_only_never_calls_hosted(tmp_path):
    local, hosted = Recording("local", error=EndpointError("boom")), Recording("hosted")
    endpoint = routed("local", local, hosted)
    with pytest.raises(EndpointError, match="local: boom"):
        endpoint.run("summarization", CARD, {"text": "x"}, Call(out_dir=tmp_path))
    local.runnable = False
    assert not endpoint.can_run(CARD)
    with pytest.raises(ModelUnavailable):
        endpoint.run("summarization", CARD, {"text": "x"}, Call(out_dir=tmp_path))
    assert hosted.calls == []


def test_hosted_only_never_calls_local(tmp_path):
    local, hosted = Recording("local"), Recording("hosted")
    endpoint = routed("hosted", local, hosted)
    assert endpoint.can_run(CARD)
    assert endpoint.run("summarization", CARD, {"text": "x"}, Call(out_dir=tmp_path)).outputs == [
        Artifact("text", value="from hosted")
    ]
    assert local.calls == []


@pytest.mark.parametrize(
    ("policy", "local_ok", "hosted_ok", "expected"),
    [
        ("hybrid", True, False, True),
        ("hybrid", False, True, True),
        ("hybrid", False, False, False),
        ("local", False, True, False),
        ("local", True, False, True),
        ("hosted", True, False, False),
        ("hosted", False, True, True),
    ],
)
def test_can_run_is_any_allowed_backend(policy, local_ok, hosted_ok, expected):
    endpoint = routed(policy, Recording("local", runnable=local_ok), Recording("hosted", runnable=hosted_ok))
    assert endpoint.can_run(CARD) is expected


def test_policies_and_describe():
    assert build_endpoint("hybrid").describe().startswith("hybrid: local")
    assert (
        "then hosted (huggingface_hub InferenceClient, provider auto)" in build_endpoint("hybrid").describe()
    )
    assert [type(b) for b in build_endpoint("local").backends] == [LocalEndpoint]
    assert [type(b) for b in build_endpoint("hosted").backends] == [HostedEndpoint]
    assert [type(b) for b in build_endpoint().backends] == [LocalEndpoint, HostedEndpoint]
    assert "local" not in build_endpoint("hosted").describe()
    with pytest.raises(ValueError, match="local, hosted, hybrid"):
        build_endpoint("cloud")
    with pytest.raises(ValueError, match="no backend"):
        RoutedEndpoint("local", {"hosted": Recording("hosted")})


# --- the local endpoint over the real models_local runtime ---------------------------------------


@pytest.fixture
def tiny_bert(tiny) -> Path:
    return Path(tiny("bert-classifier"))


def test_local_endpoint_runs_a_tiny_model_from_a_folder(tiny_bert, tmp_path):
    card = ModelCard(id="tiny/bert-classifier", task="text-classification", path=str(tiny_bert))
    local = LocalEndpoint()
    assert local.can_run(card)
    arts = local.run(
        "text-classification", card, {"text": "the cat sat on the mat"}, Call(out_dir=tmp_path)
    ).outputs
    assert all(isinstance(a, Artifact) for a in arts)
    kinds = {a.kind: a for a in arts}
    assert set(kinds) >= {"text", "data"}
    labels = {"negative", "neutral", "positive"}
    assert {item["label"] for item in kinds["data"].value} == labels  # the tiny model's own label names
    assert kinds["text"].value.split(" (")[0] in labels


def test_local_endpoint_refuses_what_the_runtime_cannot_serve(tiny_bert, tmp_path):
    local = LocalEndpoint()
    huge = ModelCard(id="tiny/bert", task="text-classification", path=str(tiny_bert), size_bytes=10**15)
    assert not local.can_run(huge)  # over any memory budget: refused without loading
    nothing = tmp_path / "not-a-model"
    nothing.mkdir()
    card = ModelCard(id="tiny/empty", task="text-classification", path=str(nothing))
    with pytest.raises(EndpointError, match="tiny/empty") as err:
        local.run("text-classification", card, {"text": "x"}, Call(out_dir=tmp_path))
    assert "Traceback" not in str(err.value) and len(str(err.value)) < 400


def test_local_endpoint_maps_runtime_errors(monkeypatch, tmp_path):
    import models_local

    def unsupported(*args: Any, **kwargs: Any) -> list[dict]:
        raise models_local.RuntimeUnsupported("unknown architecture FooNet")

    def broken(*args: Any, **kwargs: Any) -> list[dict]:
        raise ValueError("shape mismatch " + "x" * 1000)

    seen: list[tuple] = []

    def fine(
        task: str, model: str, inputs: dict, out_dir: Path, *, stop: Any = None, progress: Any = None
    ) -> list[dict]:
        seen.append((task, model, inputs))
        return [{"kind": "image", "path": str(Path(out_dir) / "a.png")}, {"kind": "text", "value": "ok"}]

    local = LocalEndpoint()
    card = ModelCard(id="acme/foo", task="image-to-image", path="/models/foo")
    monkeypatch.setattr(models_local, "run", unsupported)
    with pytest.raises(ModelUnavailable, match="acme/foo: cannot run locally: unknown architecture FooNet"):
        local.run("image-to-image", card, {"image": tmp_path / "in.png"}, Call(out_dir=tmp_path))
    monkeypatch.setattr(models_local, "run", broken)
    with pytest.raises(EndpointError, match="acme/foo failed locally: shape mismatch") as err:
        local.run("image-to-image", card, {"image": tmp_path / "in.png"}, Call(out_dir=tmp_path))
    assert not isinstance(err.value, ModelUnavailable) and len(str(err.value)) < 400
    monkeypatch.setattr(models_local, "run", fine)
    arts = local.run(
        "image-to-image", card, {"image": tmp_path / "in.png", "text": "red"}, Call(out_dir=tmp_path)
    ).outputs
    assert arts == [Artifact("image", path=tmp_path / "a.png"), Artifact("text", value="ok")]
    # The runtime gets the card's folder and plain string arguments.
    assert seen == [("image-to-image", "/models/foo", {"image": str(tmp_path / "in.png"), "text": "red"})]


def test_hybrid_with_real_backends_falls_back_to_a_hosted_url(tiny_bert, tmp_path):
    """Local refuses before loading (too large), then local cannot load the model (a summarisation
    task on a BERT classifier folder): both times the real hosted endpoint answers from the URL."""
    with FakeHFServer() as hf, loopback_only():
        endpoint = build_endpoint("hybrid", timeout=5)
        url = hf.url_for("summarization")
        huge = ModelCard(id="acme/big", task="summarization", size_bytes=10**15, endpoint_url=url)
        assert endpoint.run(
            "summarization", huge, {"text": "one two three four"}, Call(out_dir=tmp_path)
        ).outputs == [Artifact("text", value="one two three")]
        wrong = ModelCard(id="tiny/bert", task="summarization", path=str(tiny_bert), endpoint_url=url)
        assert endpoint.run(
            "summarization", wrong, {"text": "five six seven eight"}, Call(out_dir=tmp_path)
        ).outputs == [Artifact("text", value="five six seven")]
        assert len(hf.calls("summarization")) == 2


class Sized(Recording):
    """A backend with a footprint of its own."""

    def __init__(self, name: str, footprint: Footprint) -> None:
        super().__init__(name)
        self.print = footprint

    def footprint(self, model: ModelCard) -> Footprint:
        return self.print


def test_a_routes_footprint_is_the_worst_of_its_fallbacks_so_limits_hold_on_each():
    """The expert server first (nothing here), this machine after it: a 100 kB model under a 10 kB
    model limit, a 346 MB download under a 1 MB one. Before, the route said "remote, 0 bytes"."""
    remote = Sized("remote", Footprint("remote", 0, 0, 100_000))
    local = Sized("local", Footprint("local:cpu", 346_000_000, 100_000, 100_000))
    route = RoutedEndpoint("hybrid", {"remote": remote, "local": local})  # the expert server, then here
    worst = route.footprint(CARD)
    assert (worst.where, worst.download_bytes, worst.size_bytes) == ("local:cpu", 346_000_000, 100_000)
    small_model = why_not(Limits(max_model_bytes=10_000), CARD, worst)
    small_download = why_not(Limits(max_download_bytes=1_000_000), CARD, worst)
    assert small_model is not None and small_model.limit == "model_size"
    assert small_download is not None and small_download.limit == "download"
    local.runnable = False  # a route that cannot fall back here keeps the first backend's footprint
    assert route.footprint(CARD).where == "remote" and why_not(Limits(max_model_bytes=10_000), CARD, worst)


def test_the_result_says_which_backend_answered_through_the_run_wrappers(tmp_path):
    """One typed result from every layer: the router's backend, or the cache when no model ran."""
    from hugginggpt.endpoints.observed import ObservedEndpoint
    from hugginggpt.run.cache import CachingEndpoint, ResultCache

    local, hosted = Recording("local", error=EndpointError("boom")), Recording("hosted")
    stack = ObservedEndpoint(
        CachingEndpoint(routed("hybrid", local, hosted), ResultCache(tmp_path / "cache", 10**6), "s"),
        where="hybrid",
    )
    first = stack.run("summarization", CARD, {"text": "x"}, Call(out_dir=tmp_path / "a"))
    second = stack.run("summarization", CARD, {"text": "x"}, Call(out_dir=tmp_path / "b"))
    assert (first.answered_by, first.cached) == ("hosted", False)
    assert (second.answered_by, second.cached) == ("cache", True) and second.outputs == first.outputs
    assert hosted.runs() == 1
