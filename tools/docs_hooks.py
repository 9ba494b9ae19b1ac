"""mkdocs hooks (mkdocs.yml): the settings table is generated from `Settings` at build time, where
docs/settings.md says <!-- settings-table -->."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from settings_table import table  # noqa: E402

MARKER = "<!-- settings-table -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return markdown.replace(MARKER, table()) if MARKER in markdown else markdown
