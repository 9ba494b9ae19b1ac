"""What this browser keeps between visits (a gr.BrowserState in its localStorage): which
conversation is open, a short list of earlier ones, and the Settings panel's values. Gradio
encrypts the store with the app's stable secret (webui.page.browser_secret), but sends that secret to
every page: it ties the store to this app and protects nothing. Each key is a bearer credential,
and a remembered API key is as safe as the browser profile.

The browser keeps only each conversation's key, an unguessable random string; everything else
(title, messages, files) stays on the server under that key, so a crafted store can name no file
and see no other visitor's chat: an unknown key is a fresh conversation. The API key is kept only
when the person ticks the box.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from webui.chat.conversation_store import browser_key

MAX_SAVED = 10
PREFIX = "b-"  # browser keys never collide with the session hashes that API clients are keyed by
FIELDS = ("base_url", "model", "mode", "top_k", "review", "max_model_gb", "max_download_gb", "licenses")


def empty() -> dict[str, Any]:
    return {"current": "", "conversations": [], "settings": {}}


def new_key() -> str:
    return PREFIX + secrets.token_urlsafe(24)


valid_key = browser_key  # the chat engine keeps these conversations on disk


def normal(store: Any) -> dict[str, Any]:
    """The store as this code wrote it, whatever the browser sent back."""
    out = empty()
    if not isinstance(store, dict):
        return out
    if valid_key(store.get("current")):
        out["current"] = store["current"]
    for c in store.get("conversations") or []:
        if isinstance(c, dict) and valid_key(c.get("key")) and {"key": c["key"]} not in out["conversations"]:
            out["conversations"].append({"key": c["key"]})
    out["conversations"] = out["conversations"][:MAX_SAVED]
    settings = store.get("settings")
    if isinstance(settings, dict):
        out["settings"] = {k: v for k, v in settings.items() if k in (*FIELDS, "api_key") and _scalar(v)}
    return out


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and len(str(value)) <= 2000


def remember(store: Any, key: str) -> dict[str, Any]:
    """`key` as the open conversation, first in the list."""
    store = normal(store)
    entry = {"key": key}
    store["conversations"] = [entry, *(c for c in store["conversations"] if c["key"] != key)][:MAX_SAVED]
    store["current"] = key
    return store


def forget(store: Any, key: str) -> dict[str, Any]:
    store = normal(store)
    store["conversations"] = [c for c in store["conversations"] if c["key"] != key]
    if store["current"] == key:
        store["current"] = ""
    return store


def open_key(store: Any, key: str, *, keep: Callable[[str], bool] = lambda key: False) -> dict[str, Any]:
    """`key` as the open conversation; the one open until now stays in the list if `keep(it)`
    (a conversation with something in it: its page may have gone before it was remembered)."""
    store = normal(store)
    previous = store["current"]
    listed = [c["key"] for c in store["conversations"]]
    if previous and previous != key and previous not in listed and keep(previous):
        store = remember(store, previous)
    store["current"] = key
    return store


def keys(store: Any) -> list[str]:
    """The keys of the browser's conversations, the last used first, the open one among them."""
    store = normal(store)
    listed = [c["key"] for c in store["conversations"]]
    return listed if not store["current"] or store["current"] in listed else [store["current"], *listed]


def with_settings(store: Any, values: dict[str, Any], *, keep_key: bool, api_key: str) -> dict[str, Any]:
    store = normal(store)
    settings = {k: values[k] for k in FIELDS if k in values and _scalar(values[k])}
    if keep_key and api_key:
        settings["api_key"] = api_key
    store["settings"] = settings
    return store
