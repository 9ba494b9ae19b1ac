"""Files the chat shows, made reachable for Gradio without opening the workspaces to everyone."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any


def publisher(workdir: Path):
    """Gradio copies a returned file into its cache only from the working directory, the temp dir or
    allowed_paths. Listing the workspaces in allowed_paths would serve every conversation's files to
    anyone with the path, so a workdir elsewhere (e.g. /data on a Space) is copied into the cache here."""
    reachable = any(workdir.is_relative_to(Path(d).resolve()) for d in (os.getcwd(), tempfile.gettempdir()))

    def publish(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if reachable:
            return messages
        from gradio import processing_utils, utils

        def part(p: Any) -> Any:
            if isinstance(p, dict) and "path" in p and Path(p["path"]).is_relative_to(workdir):
                return {
                    **p,
                    "path": processing_utils.save_file_to_cache(p["path"], utils.get_upload_folder()),
                }
            return p

        out = []
        for m in messages:
            content = m.get("content")
            content = [part(p) for p in content] if isinstance(content, list) else part(content)
            out.append({**m, "content": content})
        return out

    return publish
