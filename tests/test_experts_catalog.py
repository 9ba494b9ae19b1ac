"""`add-space` / `add-mcp` against real servers: what they write, and how the catalog reads it."""

import json
from dataclasses import replace

import pytest
from experts_support import stdio_command

from hugginggpt import tasks
from hugginggpt.catalog import load_catalog
from hugginggpt.catalog.__main__ import main


def entries(path):
    return {e["id"]: e for e in map(json.loads, path.read_text().splitlines())}


def test_add_space_writes_one_entry_per_endpoint_fitted_or_its_own_task(space_url, tmp_path, capsys):
    out = tmp_path / "tools.jsonl"
    assert main(["add-space", space_url, "--out", str(out)]) == 0
    found = entries(out)
    server = space_url.split("//")[1].rstrip("/")
    invert, beep, sketch, slow = (found[f"space:{server}/{n}"] for n in ("invert", "beep", "sketch", "slow"))
    assert (invert["task"], invert["tool"]["args"], invert["tool"]["media"]) == (
        "image-to-image",
        {"image": "image"},
        {"image": "image"},
    )
    assert (beep["task"], beep["tool"]["outputs"]) == ("text-to-speech", ["audio"])
    assert sketch["task"] == "text-to-image" and sketch["tool"]["outputs"] == ["image", "text"]
    assert slow["task"] == "slow" and slow["tool"]["hash"].startswith("sha256:")
    catalog = load_catalog([out])
    assert catalog.problems == []
    card = catalog.get(f"space:{server}/sketch", "text-to-image")
    assert card is not None and card.tool is not None and card.tool.url == space_url
    assert tasks.get("slow") is not None and [a.name for a in tasks.get("slow").args] == ["text"]


def test_add_mcp_reads_a_gradio_apps_mcp_server_and_its_outputs(space_url, tmp_path):
    out = tmp_path / "tools.yaml"
    url = space_url + "gradio_api/mcp/"
    assert main(["add-mcp", url, "--tool", "invert", "--tool", "beep", "--out", str(out)]) == 0
    catalog = load_catalog([out])
    assert catalog.problems == []
    server = url.split("//")[1].split("/")[0]
    invert = catalog.get(f"mcp:{server}/invert", "image-to-image")
    beep = catalog.get(f"mcp:{server}/beep", "text-to-speech")
    assert invert.tool.media == (("image", "image"),) and invert.tool.encoding == "data-url"
    assert beep.tool.outputs == ("audio",)


def test_add_mcp_over_stdio_makes_a_task_type_named_after_the_tool(mcp_state, tmp_path):
    out = tmp_path / "tools.jsonl"
    assert main(["add-mcp", stdio_command(mcp_state), "--tool", "word_count", "--out", str(out)]) == 0
    (entry,) = entries(out).values()
    assert entry["id"] == "mcp:tool_mcp/word_count" and entry["task"] == "word-count"
    assert entry["tool"]["command"][-1] == str(mcp_state)
    load_catalog([out])
    spec = tasks.get("word-count")
    assert [(a.name, a.required) for a in spec.args] == [("text", True), ("min_length", False)]
    # a second server's tool of the same name gets the server's name in front
    again = tmp_path / "other.jsonl"
    out.rename(again)
    assert main(["add-mcp", stdio_command(mcp_state), "--tool", "word_count", "--out", str(again)]) == 0
    assert entries(again)["mcp:tool_mcp/word_count"]["task"] == "word-count"  # the same entry, replaced


def test_headers_are_written_as_variables_never_as_secrets(mcp_http, tmp_path, monkeypatch, capsys):
    out = tmp_path / "tools.jsonl"
    refused = main(
        ["add-mcp", mcp_http.url, "--header", "Authorization=Bearer sk-live-123", "--out", str(out)]
    )
    assert refused == 1 and "${VAR}" in capsys.readouterr().err and not out.exists()
    monkeypatch.setenv("TOOL_KEY", "sk-live-123")
    args = ["add-mcp", mcp_http.url, "--tool", "polite", "--header", "Authorization=Bearer ${TOOL_KEY}"]
    assert main([*args, "--out", str(out)]) == 0
    assert "sk-live-123" not in out.read_text() and "${TOOL_KEY}" in out.read_text()
    assert mcp_http.headers[-1]["authorization"] == "Bearer sk-live-123"  # the server was asked with it


def test_an_unreachable_server_is_a_clear_error_and_writes_nothing(tmp_path, capsys):
    from experts_support import free_port

    out = tmp_path / "tools.jsonl"
    assert main(["add-space", f"http://127.0.0.1:{free_port()}/", "--out", str(out)]) == 1
    assert "cannot read the tools of" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize(
    "bad", [{"kind": "ftp", "name": "x"}, {"kind": "mcp", "name": "x", "url": "file:///etc"}]
)
def test_a_tool_entry_that_is_not_one_is_refused_with_its_line(tmp_path, bad):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "mcp:x/x", "task": "x-tool", "tool": bad}) + "\n")
    catalog = load_catalog([path])
    assert len(catalog.problems) == 1 and catalog.problems[0].startswith(f"{path}:1: `tool")


def tool_card(tmp_path, **changes):
    from hugginggpt.catalog.tools import fingerprint

    raw = {"name": "draw", "description": "draws", "inputs": {"type": "object", "properties": {}}}
    tool = {"kind": "mcp", "server": "s", "url": "http://127.0.0.1:9/mcp", **raw, **changes}
    tool["hash"] = fingerprint(tool["name"], tool["description"], tool["inputs"], None)
    path = tmp_path / f"{tool['description']}.jsonl"
    path.write_text(json.dumps({"id": "mcp:s/draw", "task": "text-to-image", "tool": tool}) + "\n")
    (card,) = load_catalog([path], shipped=None)
    return card


def test_the_result_cache_keys_on_the_tools_hash(tmp_path):
    from hugginggpt.run.cache import ResultCache

    cache = ResultCache(tmp_path / "cache", 10**6)

    def key(card):
        return cache.key(scope="s", endpoint="mcp", task="text-to-image", model=card, inputs={"text": "a"})

    first, same, changed = tool_card(tmp_path), tool_card(tmp_path), tool_card(tmp_path, description="paints")
    assert key(first) == key(same) != key(changed)


def test_a_tool_of_unknown_licence_is_left_out_under_licenses(tmp_path):
    from hugginggpt.costs.limits import Limits, why_not
    from hugginggpt.endpoints.base import Footprint

    limits = Limits(licenses=frozenset({"mit"}))
    card = tool_card(tmp_path)
    assert why_not(limits, card, Footprint("hosted")).why == "its licence is not known"
    assert why_not(limits, replace(card, license="mit"), Footprint("hosted")) is None


def test_a_plan_file_names_a_tool_by_its_entry_id(tmp_path):
    from hugginggpt.stages.planfile import given_plan

    card = tool_card(tmp_path)
    catalog = load_catalog([next(tmp_path.glob("*.jsonl"))], shipped=None)
    raw = {
        "plan": [{"task": "text-to-image", "id": 0, "dep": [-1], "args": {"text": "a cat"}}],
        "choices": {"0": {"model": "mcp:s/draw"}},
    }
    assert given_plan(raw, catalog).choices[0].model == card


def test_tool_progress_reads_as_its_own_steps():
    from hugginggpt.run.task_progress import ProgressEvents, words

    posted = []
    ProgressEvents(1, "hang", "mcp:s/hang", posted.append)("run", 3, 10)
    assert words(posted[0]) == "running: 3 of 10"


def test_the_app_forwards_the_visitors_ip_token_to_space_tools():
    import contextvars
    from types import SimpleNamespace

    from gradio.context import LocalContext

    from hugginggpt.config import Settings
    from webui.chat.engine import ChatApp

    def visitor_context(headers):
        LocalContext.request.set(SimpleNamespace(headers=headers))
        return contextvars.copy_context()

    host = ChatApp(Settings()).host
    context = contextvars.Context().run(visitor_context, {"x-ip-token": "t-1"})
    assert host.pipeline(host.settings, caller="v", context=context).credentials.ip_token == "t-1"
    plain = contextvars.Context().run(visitor_context, {})
    assert host.pipeline(host.settings, caller="v", context=plain).credentials.ip_token is None


def test_a_tools_own_task_type_must_be_spelt_as_plans_spell_them(tmp_path):
    card = tool_card(tmp_path)
    raw = {"id": "mcp:s/draw", "task": "Word_Count", "tool": card.tool.to_json()}
    path = tmp_path / "hand.jsonl"
    path.write_text(json.dumps(raw) + "\n")
    (problem,) = load_catalog([path], shipped=None).problems
    assert problem.endswith("lowercase words joined by '-', got 'Word_Count'")
