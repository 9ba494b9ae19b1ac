"""`add-space` / `add-mcp` against real servers: what they write, and how the catalog reads it."""

import json

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
