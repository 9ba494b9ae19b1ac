"""The plan under the person's control in the app, below the page: review before running, edit and
run again from the cache, regenerate with a new seed, run a downloaded trace again. The real chat
logic against the fake LLM server and a counting fake endpoint (the browser test drives the page)."""

import json

import pytest
from app_support import app_settings, fake_catalog, photo
from fakes.endpoints import FakeEndpoint

from webui.chat import review_chat
from webui.chat.engine import ChatApp, LLMChoice
from webui.chat.review_form import field_names
from webui.page.message_actions import options

CATALOG = fake_catalog()


@pytest.fixture
def chat(llm_server, tmp_path):
    return ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=FakeEndpoint())


def fake(chat: ChatApp) -> FakeEndpoint:
    return chat.backends.endpoint  # the FakeEndpoint the app was given


def last(updates):
    *_, end = updates
    return end


def values(form, **changed):
    """The form's values as shown, with `changed` ({"1:arg:text": "..."}) typed over them."""
    out = []
    for task_id, name in field_names(form):
        task = next(t for t in form["tasks"] if t["id"] == task_id)
        shown = task["args"][name[4:]] if name.startswith("arg:") else task[name]
        out.append(changed.get(f"{task_id}:{name}", shown))
    return out


def plan_for_review(chat, tmp_path, tag="review"):
    messages, _, running = last(
        chat.respond(
            "s1",
            {"text": f"[conv-{tag}] caption", "files": [str(photo(tmp_path / "a.png"))]},
            LLMChoice(),
            review=True,
        )
    )
    return messages, running, review_chat.pending_form(chat, "s1")


def test_review_plans_and_waits_then_runs_the_edited_plan(chat, llm_server, tmp_path):
    endpoint = fake(chat)
    messages, running, form = plan_for_review(chat, tmp_path)
    assert not running and endpoint.calls == []  # nothing ran: the plan waits
    assert "Review the plan" in messages[-1]["content"]
    assert [t["task"] for t in form["tasks"]] == ["image-to-text", "text-to-image", "text-to-speech"]
    assert form["tasks"][0]["candidates"] == ["org/captioner-a", "org/captioner-b"]
    assert form["tasks"][1]["seed"].isdigit() and form["tasks"][1]["dep"] == "0"
    assert chat.conversation("s1", "").history == []  # answered only once it runs
    asked = len(llm_server.requests)

    edited = values(form, **{"1:arg:text": "a red boat at sea", "0:model": "org/captioner-b"})
    *_, (messages, _, running) = review_chat.run_reviewed(chat, "s1", form, edited, LLMChoice())
    assert not running and review_chat.pending_form(chat, "s1") is None
    assert sorted((task, model) for task, model, _ in endpoint.calls) == [
        ("image-to-text", "org/captioner-b"),
        ("text-to-image", "org/painter"),
        ("text-to-speech", "org/speaker"),
    ]
    assert next(c[2]["text"] for c in endpoint.calls if c[0] == "text-to-image") == "a red boat at sea"
    assert [r["stage"] for r in llm_server.requests[asked:]] == ["respond"]  # no planning, no selection
    bubble = next(m for m in reversed(messages) if m["role"] == "user")["content"]
    assert bubble == "▶ Run the plan (task 0: model changed; task 1: arguments changed)"
    assert messages[-1]["content"].startswith("Answer for conv-review")
    assert chat.conversation("s1", "").pending is None and len(chat.conversation("s1", "").history) == 2


def test_problems_come_back_beside_their_task_and_nothing_runs(chat, tmp_path):
    endpoint = fake(chat)
    _, _, form = plan_for_review(chat, tmp_path)
    bad_dep = values(form, **{"2:dep": "zero"})
    last(review_chat.run_reviewed(chat, "s1", form, bad_dep, LLMChoice()))
    shown = review_chat.pending_form(chat, "s1")
    assert shown["tasks"][2]["problems"] == [
        "dependencies are task numbers separated by commas (or none), not 'zero'"
    ]
    assert shown["tasks"][2]["dep"] == "zero" and not shown["tasks"][0]["problems"]  # as typed
    missing_file = values(form, **{"0:arg:image": "nothere.png", "0:delete": False})
    last(review_chat.run_reviewed(chat, "s1", form, missing_file, LLMChoice()))
    shown = review_chat.pending_form(chat, "s1")
    assert any("nothere.png" in p for p in shown["tasks"][0]["problems"]), shown
    deleted = values(form, **{"0:delete": True})
    last(review_chat.run_reviewed(chat, "s1", form, deleted, LLMChoice()))
    shown = review_chat.pending_form(chat, "s1")
    assert shown["tasks"][1]["problems"] and shown["tasks"][2]["problems"]  # they use task 0's output
    assert endpoint.calls == [] and chat.conversation("s1", "").pending is not None


def test_cancel_drops_the_plan(chat, tmp_path):
    plan_for_review(chat, tmp_path)
    messages = review_chat.cancel_review(chat, "s1")
    assert messages[-1]["content"] == "The plan was cancelled; nothing ran."
    assert review_chat.pending_form(chat, "s1") is None and fake(chat).calls == []


def test_edit_after_a_run_runs_only_the_edited_task_and_its_dependants(chat, tmp_path):
    endpoint = fake(chat)
    last(
        chat.respond(
            "s1", {"text": "[conv-e] caption", "files": [str(photo(tmp_path / "a.png"))]}, LLMChoice()
        )
    )
    assert len(endpoint.calls) == 3
    offered = [o["label"] for o in options(chat.find("s1"))]
    assert offered == ["↻ New seed ▾ (2 outputs)", "✎ Edit the plan"]  # the new seeds are one menu
    opened = [o["label"] for o in options(chat.find("s1"), seeds_open=True)]
    assert opened == ["↻ New seed ▴", "↻ New image for task 1", "↻ New voice for task 2", "✎ Edit the plan"]
    form = review_chat.edit_last_run(chat, "s1")
    edited = values(form, **{"1:arg:text": "a lighthouse"})
    *_, (messages, _, _) = review_chat.run_reviewed(chat, "s1", form, edited, LLMChoice())
    assert [c[0] for c in endpoint.calls[3:]] == ["text-to-image"]  # the caption and the voice: cached
    assert messages[-1]["content"].startswith("Answer for conv-e")
    titles = [(m.get("metadata") or {}).get("title", "") for m in messages[-9:]]
    assert sum("from the cache" in t for t in titles) == 2, titles

    *_, (messages, traces, _) = review_chat.regenerate(chat, "s1", [2], LLMChoice())
    assert [c[0] for c in endpoint.calls[4:]] == ["text-to-speech"]
    trace = json.loads(open(traces[-1]).read())
    assert trace["ran_from"] and trace["choices"]["2"]["seed"] != trace["choices"]["1"]["seed"]


def test_the_form_says_output_of_task_as_the_chat_does_and_reads_it_back(chat, tmp_path):
    _, _, form = plan_for_review(chat, tmp_path, tag="words")
    speech = next(t for t in form["tasks"] if t["task"] == "text-to-speech")
    assert speech["args"]["text"] == "output of task 0"  # the chat's words, not `<resource>-0`
    unchanged = values(form)
    *_, (messages, _, _) = review_chat.run_reviewed(chat, "s1", form, unchanged, LLMChoice())
    assert messages[-1]["content"].startswith("Answer for conv-words")
    ran = [c for c in fake(chat).calls if c[0] == "text-to-speech"]
    assert ran and ran[0][2]["text"] != "output of task 0"  # it got task 0's caption


def test_a_downloaded_trace_runs_again_every_task_with_its_seeds(chat, tmp_path):
    endpoint = fake(chat)
    *_, (_, traces, _) = chat.respond(
        "s1", {"text": "[conv-t] caption", "files": [str(photo(tmp_path / "a.png"))]}, LLMChoice()
    )
    recorded = json.loads(open(traces[-1]).read())
    form, problem = review_chat.open_trace(chat, "s1", traces[-1], client="")
    assert not problem and form["origin"] == "trace"
    assert form["tasks"][1]["seed"] == str(recorded["choices"]["1"]["seed"])
    *_, (messages, _, _) = review_chat.run_reviewed(chat, "s1", form, values(form), LLMChoice())
    assert len(endpoint.calls) == 6  # no cache: every task again
    assert next(m for m in reversed(messages) if m["role"] == "user")["content"] == "▶ Run the trace's plan"

    not_a_trace = tmp_path / "notes.json"
    not_a_trace.write_text('{"hello": 1}')
    form, problem = review_chat.open_trace(chat, "s1", not_a_trace, client="")
    assert form is None and problem.startswith("That file is not a trace this app can run again")
    assert str(tmp_path) not in problem  # no server path shown


def test_on_a_public_app_a_visitor_runs_only_the_catalogs_models(llm_server, tmp_path):
    settings = app_settings(llm_server, tmp_path / "ws")
    chat = ChatApp(settings, catalog=CATALOG, endpoint=FakeEndpoint(), public_llm_only=True)
    _, _, form = plan_for_review(chat, tmp_path)
    for model in ("/etc", "~/.cache/huggingface", "someone/unlisted-model", "org/painter"):
        last(review_chat.run_reviewed(chat, "s1", form, values(form, **{"0:model": model}), LLMChoice()))
        shown = review_chat.pending_form(chat, "s1")
        [problem] = shown["tasks"][0]["problems"]
        listed = f"{model} is not one of this app's models for image-to-text: pick one from the list"
        not_an_id = f"task 0 model {model!r} is not a Hugging Face model id"  # a path: refused on any app
        assert problem == listed or problem.startswith(not_an_id)
    assert fake(chat).calls == []
    last(
        review_chat.run_reviewed(
            chat, "s1", form, values(form, **{"0:model": "org/captioner-b"}), LLMChoice()
        )
    )
    assert [c[1] for c in fake(chat).calls if c[0] == "image-to-text"] == ["org/captioner-b"]


def test_only_media_a_task_drew_gets_a_new_seed_option(llm_server, tmp_path):
    endpoint = FakeEndpoint(failing={"org/speaker"})
    chat = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=endpoint)
    last(
        chat.respond(
            "s1", {"text": "[conv-f] caption", "files": [str(photo(tmp_path / "a.png"))]}, LLMChoice()
        )
    )
    offered = [o["value"] for o in options(chat.find("s1"))]
    assert offered == ["regenerate:1", "edit-plan"]  # the voice failed: nothing to redraw


def test_a_problem_quoting_the_plan_shows_its_words():
    from webui.page.review_panel import _problems

    shown = _problems(
        ["task 2 (text-to-speech): argument 'text' uses <resource>-0, which it does not wait for"]
    )
    # a markdown view would take "<resource>" for a tag and drop it with what follows
    assert "<resource>" not in shown and "resource>-0, which it does not wait for" in shown


def test_every_run_again_in_the_app_goes_through_the_cores_one_rerun_path(chat, tmp_path, monkeypatch):
    from hugginggpt.run.pipeline import Pipeline

    calls = []
    rerun = Pipeline.rerun

    def spy(self, previous, edits=None, **kwargs):
        calls.append((edits, kwargs["use_cache"]))
        return rerun(self, previous, edits, **kwargs)

    monkeypatch.setattr(Pipeline, "rerun", spy)
    *_, (_, traces, _) = chat.respond(
        "s1", {"text": "[conv-one] caption", "files": [str(photo(tmp_path / "a.png"))]}, LLMChoice()
    )
    assert calls == []  # a request is no re-run
    form = review_chat.edit_last_run(chat, "s1")
    last(review_chat.run_reviewed(chat, "s1", form, values(form, **{"1:arg:text": "a boat"}), LLMChoice()))
    last(review_chat.regenerate(chat, "s1", [2], LLMChoice()))
    form, _ = review_chat.open_trace(chat, "s1", traces[-1], client="")
    last(review_chat.run_reviewed(chat, "s1", form, values(form), LLMChoice()))
    assert [use_cache for _, use_cache in calls] == [True, True, False]  # edit, regenerate, trace
    assert calls[0][0] == {} and list(calls[1][0]) == [2] and calls[1][0][2].seed is not None


def test_a_reviewed_plan_is_screened_against_the_limits_in_force_when_it_runs(llm_server, tmp_path):
    """Reviewed with no limit, run after the visitor set a 10 kB model limit: the 100 kB painter does
    not run (before: its choice came from the review, and only given models were checked again)."""
    from fakes.endpoints import SizedEndpoint

    sizes = {m.id: (100_000, 0) for m in CATALOG}
    endpoint = SizedEndpoint(sizes=sizes)
    chat = ChatApp(app_settings(llm_server, tmp_path / "ws"), catalog=CATALOG, endpoint=endpoint)
    _, _, form = plan_for_review(chat, tmp_path, tag="limits")
    tight = LLMChoice(max_model_gb=0.00001)
    *_, (messages, _, _) = review_chat.run_reviewed(chat, "s1", form, values(form), tight)
    said = "\n".join(str(m.get("content", "")) for m in messages)
    assert endpoint.calls == [] and "over the 10 kB model limit" in said
