"""The page's own scripts, given to Gradio as the one function `launch(js=...)` takes."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = (
    "open_boxes.js",  # boxes a person opened stay open across a reload
    "mermaid_guard.js",  # a plan graph removed while Mermaid draws it throws no error
    "sidebar.js",  # the sidebar opens on a wide screen only
)


def page_script() -> str:
    """One function that runs each script's function in turn."""
    calls = [f"({(HERE / name).read_text(encoding='utf-8').strip()})();" for name in SCRIPTS]
    return "() => {\n" + "\n".join(calls) + "\n}"
