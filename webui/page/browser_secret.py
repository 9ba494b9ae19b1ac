"""The key with which the browser's store (gr.BrowserState) is encrypted.

Without a stable key Gradio draws a new one in every process, and nothing a browser saved before a
restart can be read after it. So: the setting `app_secret` when given, else a key generated once and
kept in the work folder, readable by the app's user only. It is no secret from visitors: Gradio
hands it to every page (GET /config) and encrypts the store in the browser, so it keeps a saved
store readable across restarts and protects nothing in it (webui.page.saved).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

FILE_NAME = "browser-secret"


def browser_secret(configured: str | None, folder: Path) -> str:
    if configured:
        return configured
    path = Path(folder) / FILE_NAME
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{FILE_NAME}.{os.getpid()}")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(secrets.token_urlsafe(32))
        try:  # a link appears whole or not at all: of two processes starting at once, one key wins
            os.link(partial, path)
        except FileExistsError:
            pass
        finally:
            partial.unlink()
    secret = path.read_text(encoding="utf-8").strip()
    if len(secret) < 32:
        raise ValueError(f"{path} holds no usable secret: delete it to have a new one made")
    return secret
