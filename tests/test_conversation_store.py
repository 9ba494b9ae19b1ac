"""Conversations kept on the server's disk (issue 20), without a browser: a browser's conversation
outlasts a closed tab and an app restart, with its files; deleting makes its files unreachable at
once and can be undone for a while; retention removes what is not used."""

import os
import stat
import time
from pathlib import Path

import pytest
from app_support import app_settings, photo
from fakes.endpoints import FakeEndpoint, cards

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings, load_settings
from hugginggpt.files.workspace import Workspace
from webui.chat.conversation_store import ConversationStore, max_bytes, retention_hours
from webui.chat.engine import ChatApp, LLMChoice
from webui.chat.files import Publisher
from webui.host.host import work_folder
from webui.page import saved
from webui.page.browser_secret import browser_secret

CATALOG = Catalog(
    cards(
        ("org/captioner", "image-to-text", 9),
        ("org/painter", "text-to-image", 3),
        ("org/speaker", "text-to-speech", 2),
    )
)


def app(llm_server, workdir, **more) -> ChatApp:
    return ChatApp(app_settings(llm_server, workdir, **more), catalog=CATALOG, endpoint=FakeEndpoint())


def ask(chat: ChatApp, key: str, text: str, *files) -> None:
    *_, (_, _, running) = chat.respond(key, {"text": text, "files": [str(f) for f in files]}, LLMChoice())
    assert not running


def test_a_browser_conversation_outlasts_a_closed_tab_and_a_restart_with_its_files(llm_server, tmp_path):
    key = saved.new_key()
    chat = app(llm_server, tmp_path / "ws", app_leave_grace_seconds=0.05)
    ask(chat, key, "[conv-keep] caption this photo", photo(tmp_path / "street.png"))
    before = chat.conversations.find(key)
    outputs = sorted(p.name for p in (before.workspace.root / "outputs").rglob("*.*"))
    assert len(before.history) == 2 and outputs
    chat.conversations.leave(key)  # the tab is closed
    time.sleep(0.3)
    assert key not in list(chat.conversations) and before.workspace.root.is_dir()  # out of memory only

    restarted = app(llm_server, tmp_path / "ws")  # a new process on the same work folder
    conv = restarted.conversations.find(key)
    assert conv is not None and conv.history == before.history and conv.display == before.display
    assert conv.title == "[conv-keep] caption this photo"  # a private app: the first request's words
    assert sorted(p.name for p in (conv.workspace.root / "outputs").rglob("*.*")) == outputs
    # The chat shows the upload from the conversation's own copy, not from Gradio's upload cache.
    [photo_message, _] = [m for m in conv.display if m["role"] == "user"]
    assert photo_message["content"]["path"] == str(conv.workspace.root / "uploads" / "street.png")
    ask(restarted, key, "[conv-keep] and again")  # the conversation goes on where it was
    assert len(restarted.conversations.find(key).history) == 4
    # The key, the browser's secret, is written nowhere on the server.
    stored = b"".join(p.read_bytes() for p in (tmp_path / "ws").rglob("*") if p.is_file())
    assert key.encode() not in stored


def test_a_public_app_titles_neutrally_and_an_api_session_is_not_kept(llm_server, tmp_path):
    chat = app(llm_server, tmp_path / "ws", public=True)
    key = saved.new_key()
    ask(chat, key, "[conv-pub] caption this photo", photo(tmp_path / "a.png"))
    assert chat.conversations.find(key).title == ""
    assert chat.conversations.title(key).startswith("Conversation of ")
    ask(chat, "a-gradio-session-hash", "[conv-api] caption this photo", photo(tmp_path / "b.png"))
    records = list((tmp_path / "ws" / "conversations").glob("*.json"))
    assert len(records) == 1 and b"conv-pub" in records[0].read_bytes()
    assert app(llm_server, tmp_path / "ws").conversations.find("a-gradio-session-hash") is None


def test_deleting_makes_the_files_unreachable_at_once_and_undo_brings_them_back(llm_server, tmp_path):
    key = saved.new_key()
    chat = app(llm_server, tmp_path / "ws")
    ask(chat, key, "[conv-del] caption this photo", photo(tmp_path / "street.png"))
    conv = chat.conversations.find(key)
    publisher = Publisher(tmp_path / "served")
    shown = publisher.messages(conv, conv.display)
    copies = [p["path"] for m in shown if isinstance(m["content"], list) for p in m["content"][1:]]
    copies += [m["content"]["path"] for m in shown if isinstance(m["content"], dict)]
    assert copies and all(os.path.isfile(c) for c in copies)
    chat.conversations.save(conv)  # the copies are recorded, to be deleted also after a restart

    restarted = app(llm_server, tmp_path / "ws")
    assert restarted.reset(key) is True  # deleted; an undo is possible
    assert not any(os.path.exists(c) for c in copies)  # the served copies: gone at once
    assert not conv.workspace.root.exists() and restarted.conversations.find(key) is None
    assert app(llm_server, tmp_path / "ws").conversations.find(key) is None  # also after a restart

    back = restarted.conversations.undelete(key)
    assert back is not None and back.history == conv.history and (back.workspace.root / "uploads").is_dir()
    assert restarted.conversations.undelete(key) is None  # only once


def test_a_saved_conversations_cached_results_go_with_it_also_after_a_restart(llm_server, tmp_path):
    """Issue 19's rule (a conversation's result cache entries are deleted with it) holds for the
    conversations issue 20 keeps on disk: after a restart, deleting it deletes them."""
    key = saved.new_key()
    chat = app(llm_server, tmp_path / "ws")
    ask(chat, key, "[conv-cache] caption this photo", photo(tmp_path / "street.png"))
    cache = chat.backends.cache
    assert cache is not None and len(cache) > 0
    restarted = app(llm_server, tmp_path / "ws")
    assert restarted.conversations.find(key) is not None and len(restarted.backends.cache) == len(cache)
    assert restarted.reset(key) is True
    assert len(restarted.backends.cache) == 0


def test_retention_and_the_undo_window_remove_conversations_for_good(tmp_path):
    now = [1_000_000.0]
    store = ConversationStore(tmp_path / "c", retention_seconds=3600, undo_seconds=60, clock=lambda: now[0])
    old, kept, deleted = saved.new_key(), saved.new_key(), saved.new_key()
    for key in (old, kept, deleted):
        Workspace(store.workspace_root(key))
        store.save(key, {"title": key})
    now[0] += 3000
    store.save(kept, {"title": "used again"})
    assert store.delete(deleted)
    now[0] += 1000  # `old` unused for 4000 s, `kept` for 1000 s; `deleted` past its undo
    assert store.load(old) is None and store.load(kept)["title"] == "used again"
    assert store.undelete(deleted) is False
    gone: list[Path] = []
    assert store.sweep(gone=gone.append) == 2  # told each one's workspace, to drop its cached results
    assert sorted(gone) == sorted(store.workspace_root(k) for k in (old, deleted))
    assert sorted(p.name for p in store.root.iterdir()) == sorted(
        [".deleted", store.folder_id(kept), store.folder_id(kept) + ".json"]
    )
    assert not any(store.deleted.iterdir())


def test_retention_and_work_folder_follow_the_settings(tmp_path):
    assert retention_hours(Settings()) == 720 and retention_hours(Settings(public=True)) == 24
    assert retention_hours(load_settings(environ={"HUGGINGGPT_APP_RETENTION_HOURS": "2"})) == 2
    with pytest.raises(ValueError, match="app_retention_hours"):
        Settings(app_retention_hours=0)
    data = tmp_path / "data"
    data.mkdir()
    assert work_folder(Settings(space_id="u/s"), space_storage=data) == data / "hugginggpt"
    assert work_folder(Settings(space_id="u/s", workdir="/w"), space_storage=data) == Path("/w")
    assert work_folder(Settings(space_id="u/s"), space_storage=tmp_path / "none") == Path("workspaces")
    assert work_folder(Settings(), space_storage=data) == Path("workspaces")  # not on a Space


def test_the_browser_secret_is_made_once_readable_by_the_app_only(tmp_path):
    first = browser_secret(None, tmp_path / "ws")
    path = tmp_path / "ws" / "browser-secret"
    assert len(first) >= 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert browser_secret(None, tmp_path / "ws") == first  # the next start reads the same key
    assert browser_secret("from-the-setting", tmp_path / "ws") == "from-the-setting"
    path.write_text("short")
    with pytest.raises(ValueError, match="no usable secret"):
        browser_secret(None, tmp_path / "ws")


def test_the_same_file_given_twice_is_stored_once(tmp_path):
    workspace = Workspace(tmp_path / "w")
    picture = photo(tmp_path / "street.png")
    first = workspace.add_upload(picture)
    assert workspace.add_upload(picture) == first and workspace.add_upload(first) == first
    (tmp_path / "other").mkdir()
    other = photo(tmp_path / "other" / "street.png", (20, 10))
    assert workspace.add_upload(other).name == "street-2.png"  # another picture of the same name
    assert sorted(p.name for p in workspace.uploads_dir.iterdir()) == ["street-2.png", "street.png"]


def test_the_table_removes_expired_conversations_while_the_app_runs(tmp_path):
    from webui.chat.conversations import SWEEP_SECONDS, ConversationTable

    now = [1000.0]
    store = ConversationStore(tmp_path / "c", retention_seconds=60, clock=lambda: now[0])
    table = ConversationTable(tmp_path, store=store, saved=saved.valid_key, clock=lambda: now[0])
    conv = table.get(saved.new_key(), "")
    conv.requests = 1
    table.save(conv)
    now[0] += 100  # past its retention, and not yet time to look
    table.get("an-api-session", "")
    assert len(list(store.root.glob("*.json"))) == 1
    now[0] += SWEEP_SECONDS
    table.get("an-api-session", "")
    assert not list(store.root.glob("*.json")) and not conv.workspace.root.exists()


def test_a_disk_that_refuses_the_record_does_not_break_the_chat(llm_server, tmp_path, monkeypatch):
    chat = app(llm_server, tmp_path / "ws")

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(chat.conversations.store, "save", full)
    key = saved.new_key()
    ask(chat, key, "[conv-full] caption this photo", photo(tmp_path / "a.png"))
    assert len(chat.conversations.find(key).history) == 2  # answered, kept in memory


def test_the_disk_cap_removes_the_least_recently_updated_conversations_first(tmp_path):
    """Over the cap, a deleted conversation goes first, then the oldest saved ones, with their
    results (`gone`), until the rest fits; a save over the cap trims at once."""
    now = [1_000_000.0]
    store = ConversationStore(tmp_path / "c", retention_seconds=86400, max_bytes=7_000, clock=lambda: now[0])
    keys = [saved.new_key() for _ in range(4)]
    for key in keys:  # 3000 bytes of files each, saved one second apart
        Workspace(store.workspace_root(key))
        (store.workspace_root(key) / "outputs" / "out.bin").write_bytes(b"x" * 3000)
        store.save(key, {"title": key})
        now[0] += 1
    store.delete(keys[2])
    gone: list[Path] = []
    assert store.over_cap and store.sweep(gone=gone.append) == 2  # 4 x ~3 kB: two must go
    assert gone == [store.workspace_root(keys[2]), store.workspace_root(keys[0])]
    assert store.load(keys[0]) is None and not store.workspace_root(keys[0]).exists()
    assert store.undelete(keys[2]) is False  # the deleted one was the first to go
    assert store.load(keys[1]) and store.load(keys[3]) and not store.over_cap

    # A save that goes over trims right away; a conversation in `keep` (open now) stays.
    extra = saved.new_key()
    Workspace(store.workspace_root(extra))
    (store.workspace_root(extra) / "outputs" / "big.bin").write_bytes(b"x" * 1000)
    store.save(extra, {"title": "extra"})
    assert store.over_cap and store.trim(keep=[keys[1]]) == 1
    assert store.load(keys[1]) and store.load(keys[3]) is None and store.load(extra)


def test_the_table_trims_after_a_save_never_an_open_conversation_and_forgets_its_results(tmp_path):
    from webui.chat.conversations import ConversationTable

    store = ConversationStore(tmp_path / "c", retention_seconds=86400, max_bytes=5_000)
    forgotten: list[str] = []

    class Cache:
        def forget_scope(self, scope: str) -> None:
            forgotten.append(scope)

    table = ConversationTable(tmp_path, store=store, saved=saved.valid_key, cache=Cache())  # type: ignore[arg-type]
    first, second = saved.new_key(), saved.new_key()
    for key in (first, second):
        conv = table.get(key, "")
        (conv.workspace.root / "outputs" / "out.bin").write_bytes(b"x" * 3000)
        conv.requests = 1
        table.save(conv)
    # Both are open (in memory): over the cap, yet neither is removed.
    assert store.over_cap and store.load(first) and store.load(second)
    with table._lock:
        table._by_session.pop(first)  # its page left: out of memory, kept on disk
    table.save(table.get(second, ""))  # the next save trims at once
    assert store.load(first) is None and store.load(second) and not store.over_cap
    assert forgotten == [str(store.workspace_root(first))]


def test_the_disk_cap_follows_the_settings():
    assert max_bytes(Settings()) is None  # a private app: the owner's own disk
    assert max_bytes(Settings(public=True)) == 5_000_000_000
    assert max_bytes(Settings(public=True, app_conversations_max_gb=0)) is None  # 0: no cap
    env = {"HUGGINGGPT_APP_CONVERSATIONS_MAX_GB": "0.5"}
    assert max_bytes(load_settings(environ=env)) == 500_000_000
    with pytest.raises(ValueError, match="app_conversations_max_gb"):
        Settings(app_conversations_max_gb=-1)


def test_a_conversations_record_is_written_for_the_apps_own_user_only(tmp_path):
    store = ConversationStore(tmp_path / "c", retention_seconds=3600)
    key = saved.new_key()
    store.save(key, {"title": "t"})
    mode = stat.S_IMODE((store.root / f"{store.folder_id(key)}.json").stat().st_mode)
    assert mode == 0o600, oct(mode)  # before: 0644


def noise_png(path: Path, seed: int) -> Path:
    import numpy as np
    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (256, 256, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)  # noise does not compress: about 197 kB
    return path


def disk_bytes(*folders: Path) -> int:
    return sum(f.stat().st_size for folder in folders for f in folder.rglob("*") if f.is_file())


def test_sixteen_uploads_against_a_small_cap_stay_within_it_and_leave_others_alone(llm_server, tmp_path):
    """One caller sends 16 pictures of ~197 kB, each in a new conversation of its browser, against a
    1.5 MB cap; another caller's conversation sits idle on disk. The cap counts the copies served to
    the page (Gradio's cache) too, trims before an upload would pass it, and takes the flooding
    caller's own conversations, never the other's."""
    settings = app_settings(
        llm_server, tmp_path / "ws", app_conversations_max_gb=0.0015, app_retention_hours=1
    )
    chat = ChatApp(settings, catalog=CATALOG, endpoint=FakeEndpoint(), public_llm_only=True)
    served = tmp_path / "gradio-cache"
    publisher = Publisher(served)
    chat.conversations.idle_seconds = 0  # each leaves memory at the next request: none stays open

    def send(key: str, caller: str, picture: Path) -> list[dict]:
        *_, (messages, _, _) = chat.respond(
            key, {"text": "caption", "files": [str(picture)]}, LLMChoice(), client=caller
        )
        conv = chat.find(key)
        if conv is not None:
            publisher.messages(conv, messages)  # the page's copies, as app.py serves them
            chat.conversations.save(conv)
        return messages

    other = saved.new_key()
    send(other, "10.0.0.1", noise_png(tmp_path / "other.png", 0))
    refused = 0
    for n in range(16):
        said = send(saved.new_key(), "10.0.0.9", noise_png(tmp_path / f"p{n}.png", n + 1))
        refused += "disk for conversations is full" in str(said[-1].get("content"))
    chat.conversations.sweep()
    total = disk_bytes(tmp_path / "ws" / "conversations", served)
    print(f"\n16 uploads against a 1.5 MB cap: {total / 1e6:.2f} MB kept, {refused} refused")
    assert total <= 1_500_000 + 250_000  # the cap, and at most the last upload's copies measured after it
    assert chat.conversations.store.load(other) is not None  # before: evicted by the flood
    chat.conversations.idle_seconds = 3600  # now the caller's conversations stay open in its pages
    for n in range(8):
        said = send(saved.new_key(), "10.0.0.9", noise_png(tmp_path / f"q{n}.png", n + 20))
        refused += "disk for conversations is full" in str(said[-1].get("content"))
    total = disk_bytes(tmp_path / "ws" / "conversations", served)
    print(f"then 8 kept open: {total / 1e6:.2f} MB kept, {refused} refused")
    assert refused >= 1 and total <= 1_500_000 + 250_000  # only open ones left: the upload is refused
