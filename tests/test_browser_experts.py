"""The done-when of issue 27 in a real Chromium: a plan mixing a Space tool, a local model and an MCP
tool runs in the chat, the Space's image flowing into the local classifier, with its timings in the
closing note. Saves a screenshot under .tmp/screenshots (and NOTES_SCREENSHOT, if set)."""

import json
import os
import re
import shutil
from pathlib import Path

from app_support import app_settings, running_app
from experts_support import stdio_command
from fakes.llm_server import FakeLLMServer
from test_browser import SCREENSHOTS, _browser_or_skip, chromium, open_app

from hugginggpt.catalog import ModelCard, load_catalog
from hugginggpt.catalog.__main__ import main

PLAN = {
    "tasks": [
        {"task": "text-to-image", "id": 0, "dep": [-1], "args": {"text": "a red cat"}},
        {"task": "image-classification", "id": 1, "dep": [0], "args": {"image": "<resource>-0"}},
        {"task": "word-count", "id": 2, "dep": [-1], "args": {"text": "one two three", "min_length": "4"}},
    ]
}


def test_browser_a_space_a_local_model_and_an_mcp_tool_in_one_request(
    space_url, mcp_state, tiny_vit, tmp_path
):
    sync_playwright = _browser_or_skip()
    out = tmp_path / "tools.jsonl"
    assert main(["add-space", space_url, "--api", "sketch", "--out", str(out)]) == 0
    assert main(["add-mcp", stdio_command(mcp_state), "--tool", "word_count", "--out", str(out)]) == 0
    catalog = load_catalog([out], shipped=None)
    catalog.add(ModelCard(id="tiny/vit", task="image-classification", path=tiny_vit, local=True))
    with FakeLLMServer() as server:
        server.script("plan", json.dumps(PLAN))
        server.script("respond", "I drew a red cat, classified the picture and counted the words.")
        with (
            running_app(app_settings(server, tmp_path / "ws"), catalog=catalog) as demo,
            sync_playwright() as p,
            chromium(p) as browser,
        ):
            page = open_app(browser, demo.local_url, height=1400)
            box = page.locator("#request textarea")
            box.fill(
                "draw a red cat, say what the picture shows, and count the long words of 'one two three'"
            )
            box.press("Enter")
            chat = page.locator("#chat")
            summary = chat.get_by_text(re.compile(r"^3 tasks · 3 models · [\d.]+ s"))
            summary.wait_for(timeout=120_000)  # the closing note: tasks, models and seconds
            assert "✕ failed" not in summary.locator("..").inner_text()
            summary.click()
            chat.get_by_text("Plan: 3 tasks").click()
            for title in (
                r"Task 0 · text-to-image · space:127\.0\.0\.1:\d+/sketch · ✓",
                r"Task 1 · image-classification · tiny/vit · ✓",
                r"Task 2 · word-count · mcp:tool_mcp/word_count · ✓",
            ):
                chat.locator(".title").filter(has_text=re.compile(title)).first.wait_for()
            assert chat.locator("img[src*='/gradio_api/file=']").count() >= 1  # the Space's picture
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shot = SCREENSHOTS / "experts-space-local-mcp.png"
            page.screenshot(path=str(shot), full_page=True)
            if os.environ.get("NOTES_SCREENSHOT"):
                shutil.copy(shot, Path(os.environ["NOTES_SCREENSHOT"]))
