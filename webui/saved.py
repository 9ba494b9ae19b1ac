"""What this browser keeps between visits (a gr.BrowserState in its localStorage): which conversation
is open, a short list of earlier ones, and the Settings panel's values.

The browser keeps only each conversation's key and title; what it shows (messages, files) stays on
the server under that key, so a crafted store can name no file and see no other visitor's chat: an
unknown key is a fresh conversation. The API key is kept only when the person ticks the box.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

MAX_SAVED = 10
PREFIX = "b-"  # browser keys never collide with the session hashes that API clients are keyed by
_KEY = re.compile(r"^b-[A-Za-z0-9_-]{20,64}$")
FIELDS = ("base_url", "model", "mode", "top_k", "review")


def empty() -> dict[str, Any]:
    return {"current": "", "conversations": [], "settings": {}}


def new_key() -> str:
    return PREFIX + secrets.token_urlsafe(24)


def valid_key(key: Any) -> bool:
    return isinstance(key, str) and bool(_KEY.match(key))


def normal(store: Any) -> dict[str, Any]:
    """The store as this code wrote it, whatever the browser sent back."""
    out = empty()
    if not isinstance(store, dict):
        return out
    if valid_key(store.get("current")):
        out["current"] = store["current"]
    for c in store.get("conversations") or []:
        if isinstance(c, dict) and valid_key(c.get("key")) and isinstance(c.get("title"), str):
            out["conversations"].append({"key": c["key"], "title": c["title"][:80]})
    out["conversations"] = out["conversations"][:MAX_SAVED]
    settings = store.get("settings")
    if isinstance(settings, dict):
        out["settings"] = {k: v for k, v in settings.items() if k in (*FIELDS, "api_key") and _scalar(v)}
    return out


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and len(str(value)) <= 2000


def remember(store: Any, key: str, title: str) -> dict[str, Any]:
    """`key` as the open conversation, first in the list under `title` (kept if it had one)."""
    store = normal(store)
    old = next((c for c in store["conversations"] if c["key"] == key), None)
    entry = {"key": key, "title": old["title"] if old else _title(title)}
    store["conversations"] = [entry, *(c for c in store["conversations"] if c["key"] != key)][:MAX_SAVED]
    store["current"] = key
    return store


def forget(store: Any, key: str) -> dict[str, Any]:
    store = normal(store)
    store["conversations"] = [c for c in store["conversations"] if c["key"] != key]
    if store["current"] == key:
        store["current"] = ""
    return store


def open_key(store: Any, key: str) -> dict[str, Any]:
    store = normal(store)
    store["current"] = key
    return store


def choices(store: Any) -> list[tuple[str, str]]:
    """(title, key) of the earlier conversations, newest first, for a dropdown."""
    return [(c["title"], c["key"]) for c in normal(store)["conversations"]]


def with_settings(store: Any, values: dict[str, Any], *, keep_key: bool, api_key: str) -> dict[str, Any]:
    store = normal(store)
    settings = {k: values[k] for k in FIELDS if k in values and _scalar(values[k])}
    if keep_key and api_key:
        settings["api_key"] = api_key
    store["settings"] = settings
    return store


def _title(text: str) -> str:
    text = " ".join(text.split()) or "(files only)"
    return text if len(text) <= 60 else text[:59] + "…"
