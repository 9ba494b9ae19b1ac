"""Credentials go only to their owners: the HF token to Hugging Face's own hosts, an LLM key to the
base URL it was given with. The attacker's host is a real HTTP server on 127.0.0.1 that counts what
reaches it; the clients are the real ones (huggingface_hub's InferenceClient, openai)."""

from __future__ import annotations

import io
import json

import pytest
from fakes.attacker import Attacker
from fakes.hf_inference_server import loopback_only
from fakes.hub_server import FakeHub, HubModel
from fakes.llm_server import FakeLLMServer

from hugginggpt.catalog import Catalog, ModelCard
from hugginggpt.catalog.userfile import read_user_file
from hugginggpt.commands.cli import main
from hugginggpt.endpoints import Call, HostedEndpoint, ModelUnavailable
from hugginggpt.llms.interface import LLMError
from hugginggpt.llms.openai_compatible import OpenAICompatibleLLM
from hugginggpt.stages.plan import Plan, Task
from hugginggpt.stages.planfile import Edit, PlanFileError, apply_edits, given_plan

CANARY = "hf_canaryCANARYcanaryCANARYcanary0123"


@pytest.fixture
def evil():
    with loopback_only(), Attacker() as server:
        yield server


@pytest.fixture
def token(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", CANARY)
    return CANARY


def text_plan() -> Plan:
    return Plan([Task(0, "text-classification", [], {"text": "a good cat"})])


def test_a_plan_file_naming_a_url_as_model_is_refused_with_a_reason(evil):
    raw = {"plan": text_plan().to_json(), "choices": {"0": {"model": f"{evil.url}/x"}}}
    with pytest.raises(PlanFileError, match="not a Hugging Face model id"):
        given_plan(raw, Catalog([]))
    for bad in ("../../etc", "/etc", "owner/name/extra", "a..b", "x" * 97, "ａcme/ｍodel"):
        with pytest.raises(PlanFileError, match="not a Hugging Face model id"):
            given_plan({"plan": text_plan().to_json(), "choices": {"0": bad}}, Catalog([]))
    assert evil.requests == []


def test_a_folder_is_a_model_only_where_the_catalog_lists_it(tmp_path):
    folder = ModelCard(id="mine/tiny", task="text-classification", path=str(tmp_path))
    given = given_plan({"plan": text_plan().to_json(), "choices": {"0": "mine/tiny"}}, Catalog([folder]))
    assert given.choices[0].model == folder
    hub = given_plan({"plan": text_plan().to_json(), "choices": {"0": "acme/bert"}}, Catalog([]))
    assert hub.choices[0].model == ModelCard(id="acme/bert", task="text-classification")
    with pytest.raises(PlanFileError, match="not a Hugging Face model id"):
        given_plan({"plan": text_plan().to_json(), "choices": {"0": str(tmp_path)}}, Catalog([]))


def test_a_hub_like_id_that_is_a_folder_here_is_refused(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PlanFileError, match="names a folder on this machine"):
        given_plan({"plan": text_plan().to_json(), "choices": {"0": "models"}}, Catalog([]))


def test_a_trace_naming_a_url_as_model_is_refused_when_loaded(evil):
    from hugginggpt.run.traces import plan_from_trace

    trace = {
        "plan": text_plan().to_json(),
        "choices": {"0": {"model": f"{evil.url}/x"}},
        "tasks": [{"id": 0, "status": "done", "model": f"{evil.url}/x"}],
    }
    with pytest.raises(PlanFileError, match="not a Hugging Face model id"):
        plan_from_trace(trace, Catalog([]))
    assert evil.requests == []


def test_a_model_typed_in_the_review_form_goes_through_the_same_check(evil):
    with pytest.raises(PlanFileError, match="not a Hugging Face model id"):
        apply_edits(text_plan(), {}, {0: Edit(model=f"{evil.url}/x")}, Catalog([]))


def test_a_user_catalog_entry_with_a_url_for_id_is_refused(tmp_path):
    mine = tmp_path / "mine.jsonl"
    mine.write_text(
        json.dumps({"id": "http://127.0.0.1:9/x", "task": "text-classification"})
        + "\n"
        + json.dumps(
            {"id": "my server", "task": "text-classification", "endpoint_url": "http://127.0.0.1:9/x"}
        )
        + "\n"
    )
    entries, problems = read_user_file(mine)
    assert [e.fields["id"] for e in entries] == ["my server"]  # a name for the operator's own URL
    assert len(problems) == 1 and "not a Hugging Face model id" in problems[0]


def test_a_card_with_a_url_for_id_sends_nothing_at_all(evil, token, tmp_path):
    """Defence in depth: such a card reaching the hosted endpoint is refused before any connection."""
    endpoint = HostedEndpoint(timeout=5.0, retries=0)
    card = ModelCard(id=f"{evil.url}/x", task="text-classification")
    assert not endpoint.can_run(card)
    with pytest.raises(ModelUnavailable, match="not a Hugging Face model id"):
        endpoint.run("text-classification", card, {"text": "a b"}, Call(out_dir=tmp_path))
    assert evil.requests == []


def test_the_transport_sends_the_hf_token_only_to_hugging_face(evil, token, tmp_path):
    """At the transport: whatever URL a card's endpoint has, no Authorization header leaves for it,
    and a client built with the token by hand gets the same rule."""
    from huggingface_hub import InferenceClient

    endpoint = HostedEndpoint(token=CANARY, timeout=5.0, retries=0)
    card = ModelCard(id="acme/x", task="text-classification", endpoint_url=f"{evil.url}/x")
    endpoint.run("text-classification", card, {"text": "a b"}, Call(out_dir=tmp_path))
    InferenceClient(model=f"{evil.url}/y", token=CANARY, timeout=5).text_classification("a b")
    assert len(evil.requests) == 2 and evil.credentials() == []


def test_the_hf_token_still_reaches_the_configured_hub(token, monkeypatch):
    """HF_ENDPOINT (the Hub the operator configured; a fake here) is Hugging Face's own host."""
    from huggingface_hub import constants

    with loopback_only(), FakeHub([HubModel("acme/sum", "summarization")]) as hub:
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        HostedEndpoint(timeout=5.0).can_run(ModelCard(id="acme/sum", task="summarization"))
    seen = [(r["path"], r["authorization"]) for r in hub.requests]
    assert seen == [("/api/models/acme/sum", f"Bearer {CANARY}")]


def test_a_plan_file_run_from_the_cli_never_reaches_a_url_model(evil, token, tmp_path):
    """The reproduction: `--plan FILE` naming `http://<host>/x`, hosted inference, HF_TOKEN set."""
    plan = tmp_path / "plan.json"
    choices = {"0": {"model": f"{evil.url}/x"}}
    plan.write_text(json.dumps({"request": "label it", "plan": text_plan().to_json(), "choices": choices}))
    with FakeLLMServer() as llm:
        llm.script("respond", "Done.")
        out, err = io.StringIO(), io.StringIO()
        flags = ["--llm-base-url", llm.url, "--llm-api-key", "sk-x", "--inference", "hosted"]
        code = main([*flags, "--workdir", str(tmp_path / "ws"), "--plan", str(plan)], stdout=out, stderr=err)
    assert code == 2 and "not a Hugging Face model id" in err.getvalue()
    assert "Traceback" not in err.getvalue()
    assert evil.requests == []


def test_an_llm_key_does_not_follow_a_redirect_to_another_host():
    """The LLM server hands the client on to another host: the key stays behind."""
    with Attacker() as evil, Attacker(redirect_to=evil.url) as llm_host:
        llm = OpenAICompatibleLLM(
            base_url=f"{llm_host.url}/v1", api_key="sk-canary", max_retries=0, timeout=5
        )
        with pytest.raises(LLMError):
            llm.complete([{"role": "user", "content": "hi"}], stage="chat")
    assert llm_host.credentials() == ["Bearer sk-canary"]
    assert len(evil.requests) == 1 and evil.credentials() == []
