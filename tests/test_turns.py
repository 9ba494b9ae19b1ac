"""A turn done again in place (issue 20): regenerating an image, running the edited plan and editing
a request's words replace the turn where it stands; the earlier answer folds into a closed "Version N"
box inside it (nothing lost), the LLM's history forgets the replaced exchange, and the plans that the
message actions need outlast a restart. The real chat logic against the fake LLM server."""

import pytest
from app_support import app_settings, fake_catalog, photo
from fakes.endpoints import FakeEndpoint

from webui.chat import review_chat
from webui.chat.engine import ChatApp, LLMChoice
from webui.chat.turns import VERSION_ID, Turn, fold, opened
from webui.page import saved
from webui.page.message_actions import options

CATALOG = fake_catalog()


@pytest.fixture
def chat(llm_server, tmp_path):
    return ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=FakeEndpoint())


def last(updates):
    *_, end = updates
    return end


def ask(chat, key, text, *files, **more):
    message = {"text": text, "files": [str(f) for f in files]}
    return last(chat.respond(key, message, LLMChoice(), **more))


def boxes(messages):
    """Top-level version boxes and the titles of what nests directly in each."""
    out = {}
    for m in messages:
        meta = m.get("metadata") or {}
        if str(meta.get("id", "")).startswith(VERSION_ID) and not meta.get("parent_id"):
            out[meta["id"]] = (meta["title"], [])
        elif meta.get("parent_id") in out:
            out[meta["parent_id"]][1].append(m)
    return list(out.values())


def media(messages, *, top_level=True):
    """The media files the app's messages show (a folded one nests as a message of its own)."""
    paths = []
    for m in messages:
        if m["role"] != "assistant" or bool((m.get("metadata") or {}).get("parent_id")) == top_level:
            continue
        parts = m["content"] if isinstance(m["content"], list) else [m["content"]]
        paths += [p["path"] for p in parts if isinstance(p, dict) and not p["path"].endswith(".json")]
    return paths


def test_a_new_seed_redraws_the_image_in_place_and_folds_the_old_one_into_a_version_box(chat, tmp_path):
    key = saved.new_key()
    ask(chat, key, "[conv-v] caption", photo(tmp_path / "a.png"))
    conv = chat.find(key)
    first_image = media(conv.display)
    assert len(conv.history) == 2 and len(conv.turns) == 1 and first_image

    *_, (messages, _, running) = review_chat.regenerate(chat, key, [1], LLMChoice())
    assert not running
    assert [m["role"] for m in messages].count("user") == 2  # the photo and the words: one turn
    [(title, inside)] = boxes(messages)
    assert title.startswith("Version 1") and "new seed for task 1" in title
    assert media(inside, top_level=False)[0] == first_image[0]  # the old image, kept in its box
    assert media(messages) and media(messages) != first_image  # a new image below it
    assert messages[-1]["content"].startswith("Answer for conv-v")
    assert len(conv.history) == 2  # the LLM sees the exchange once, as it now stands

    last(review_chat.regenerate(chat, key, [1], LLMChoice()))
    titles = [title for title, _ in boxes(conv.display)]
    assert [t.split(" ·")[0] for t in titles] == ["Version 1", "Version 2"]  # side by side, not nested


def test_editing_a_request_runs_its_new_words_in_place_and_folds_what_came_after(chat, tmp_path):
    key = saved.new_key()
    ask(chat, key, "[conv-a] caption", photo(tmp_path / "a.png"))
    ask(chat, key, "[conv-b] caption", photo(tmp_path / "b.png"))
    conv = chat.find(key)
    assert len(conv.turns) == 2 and len(conv.history) == 4

    message = review_chat.request_of(chat, key, 0)
    assert message["text"] == "[conv-a] caption" and len(message["files"]) == 1
    message["text"] = "[conv-c] caption"
    last(chat.respond(key, message, LLMChoice(), replace=0))
    users = [m for m in conv.display if m["role"] == "user"]
    assert [m["content"] for m in users][1] == "[conv-c] caption"  # its file kept, before it
    assert len(users) == 2 and users[0]["content"]["path"].endswith("a.png")
    [(title, inside)] = boxes(conv.display)
    assert "your edit" in title
    quoted = [m["content"] for m in inside if "You asked" in str(m["content"])]
    assert len(quoted) == 1 and "[conv-b] caption" in str(quoted[0])  # the later request, as a quote
    assert [h["content"] for h in conv.history if h["role"] == "user"] == ["[conv-c] caption"]
    assert conv.display[-1]["content"].startswith("Answer for conv-c")
    assert len(conv.turns) == 1


def test_the_edited_last_plan_runs_in_place_and_a_reviewed_plan_is_a_turn(chat, tmp_path):
    key = saved.new_key()
    ask(chat, key, "[conv-p] caption", photo(tmp_path / "a.png"), review=True)
    form = review_chat.pending_form(chat, key)
    fields = review_chat_values(form)
    last(review_chat.run_reviewed(chat, key, form, fields, LLMChoice()))
    conv = chat.find(key)
    assert len(conv.turns) == 2 and boxes(conv.display) == []  # the request, then "▶ Run the plan"

    shown = list(conv.display)
    review_chat.edit_last_run(chat, key)
    assert options(conv) == []  # nothing to click while the plan is open for editing
    assert review_chat.cancel_review(chat, key) == shown  # closed unedited: no "cancelled" note
    assert options(conv)  # and its actions are back
    form = review_chat.edit_last_run(chat, key)
    last(review_chat.run_reviewed(chat, key, form, review_chat_values(form), LLMChoice()))
    assert len(conv.turns) == 2 and len(boxes(conv.display)) == 1  # in place of the last answer


def review_chat_values(form):
    from webui.chat.review_form import field_names

    out = []
    for task_id, name in field_names(form):
        task = next(t for t in form["tasks"] if t["id"] == task_id)
        out.append(task["args"][name[4:]] if name.startswith("arg:") else task[name])
    return out


def test_the_last_plan_and_a_pending_one_outlast_a_restart(llm_server, tmp_path):
    key, other = saved.new_key(), saved.new_key()
    chat = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=FakeEndpoint())
    ask(chat, key, "[conv-r] caption", photo(tmp_path / "a.png"))
    ask(chat, other, "[conv-q] caption", photo(tmp_path / "b.png"), review=True)
    ran = chat.find(key).last_run

    restarted = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=FakeEndpoint())
    conv = restarted.find(key)
    assert conv.last_run is not None and conv.last_run.plan == ran.plan and conv.turns
    assert {i: c.seed for i, c in conv.last_run.choices.items()} == {
        i: c.seed for i, c in ran.choices.items()
    }
    assert [o["value"] for o in options(conv)][-1] == "edit-plan"
    form = review_chat.edit_last_run(restarted, key)  # "Edit the plan" works after the restart
    assert form is not None and [t["task"] for t in form["tasks"]] == [t.task for t in ran.plan.tasks]
    *_, (messages, _, _) = review_chat.regenerate(restarted, key, [1], LLMChoice())
    assert len(boxes(messages)) == 1  # in place, after the restart too
    assert review_chat.pending_form(restarted, other) is not None  # the plan under review waits still


def test_a_saved_plan_naming_a_url_is_not_read_back(llm_server, tmp_path):
    """The record is read as any plan file: a model that is a URL never reaches an endpoint."""
    import json

    key = saved.new_key()
    chat = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=FakeEndpoint())
    ask(chat, key, "[conv-u] caption", photo(tmp_path / "a.png"))
    store = chat.conversations.store
    record = store.load(key)
    record["last_run"]["choices"]["1"]["model"] = "http://127.0.0.1:9/x"
    store.save(key, record)
    restarted = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=FakeEndpoint())
    conv = restarted.find(key)
    assert conv is not None and conv.last_run is None and options(conv) == []
    assert json.dumps(conv.display)  # the chat itself is still there


def test_fold_nests_top_level_messages_keeps_nested_boxes_and_drops_options():
    messages = [
        {"role": "assistant", "content": "", "metadata": {"title": "work", "id": "r1-work"}},
        {"role": "assistant", "content": "plan", "metadata": {"title": "plan", "parent_id": "r1-work"}},
        {"role": "assistant", "content": "answer", "options": [{"value": "edit-plan"}]},
        {"role": "user", "content": {"path": "/x.png"}},
    ]
    box, work, plan, answer, asked, sent = fold(messages, "Version 1")
    assert box["metadata"]["status"] == "done" and box["metadata"]["title"] == "Version 1"
    assert work["metadata"]["parent_id"] == box["metadata"]["id"]
    assert plan["metadata"]["parent_id"] == "r1-work"  # still inside its own box
    assert "options" not in answer and answer["metadata"]["parent_id"] == box["metadata"]["id"]
    # a message of several parts nests as one message per part (Gradio shows a nested one's first only)
    assert asked["role"] == "assistant" and asked["content"] == "**You sent:**"
    assert sent["content"] == {"path": "/x.png"} and sent["metadata"] == {"parent_id": box["metadata"]["id"]}
    [quoted] = fold([{"role": "user", "content": "then"}], "Version 2")[1:]
    assert quoted["content"] == "**You asked:** then"
    media = {"role": "assistant", "content": ["*Task 1 · text-to-image*", {"path": "/y.png"}]}
    caption, image = fold([media], "Version 3")[1:]
    assert caption["content"] == "*Task 1 · text-to-image*" and image["content"] == {"path": "/y.png"}
    assert caption["metadata"]["parent_id"] == image["metadata"]["parent_id"]


def test_a_turn_out_of_range_begins_a_new_one():
    display = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    turns = [Turn(0, 0, "hi")]
    new_display, history, new_turns = opened(
        display, ["h1", "h2"], turns, [{"role": "user", "content": "again"}], "again", replace=5
    )
    assert new_display[-1]["content"] == "again" and history == ["h1", "h2"]
    assert new_turns[-1] == Turn(2, 2, "again")
    assert Turn.from_json([1, -1, "x"]) is None and Turn.from_json("nonsense") is None
