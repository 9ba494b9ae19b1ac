"""The options under the last answer (webui.page.message_actions): a run that drew several outputs
offers its new seeds as one menu, which opens into one entry per task and folds again."""

from types import SimpleNamespace

from hugginggpt.stages.plan import Plan, Task
from webui.page import message_actions
from webui.page.message_actions import (
    EDIT_PLAN,
    SEEDS_CLOSE,
    SEEDS_OPEN,
    options,
    regenerated_task,
    with_options,
)


def finished(images: int, voices: int = 0) -> SimpleNamespace:
    """A conversation whose last run drew `images` images and read `voices` texts aloud."""
    tasks = [Task(i, "text-to-image", [-1], {"text": f"picture {i}"}) for i in range(images)]
    tasks += [Task(images + i, "text-to-speech", [-1], {"text": "hi"}) for i in range(voices)]
    run = SimpleNamespace(plan=Plan(tasks), made_media={t.id for t in tasks})
    return SimpleNamespace(resumable=None, cancel=None, pending=None, last_run=run)


def test_six_images_end_with_one_menu_and_the_plan_to_edit():
    conv = finished(6)
    folded = options(conv)
    assert folded == [
        {"label": "↻ New seed ▾ (6 outputs)", "value": SEEDS_OPEN},
        {"label": "✎ Edit the plan", "value": EDIT_PLAN},
    ]
    opened = options(conv, seeds_open=True)
    assert opened[0] == {"label": "↻ New seed ▴", "value": SEEDS_CLOSE}  # folds it again
    assert [o["label"] for o in opened[1:-1]] == [f"↻ New image for task {i}" for i in range(6)]
    assert [regenerated_task(o["value"]) for o in opened[1:-1]] == list(range(6))  # each starts a run
    assert opened[-1]["value"] == EDIT_PLAN
    assert all(regenerated_task(v) is None for v in message_actions.MENU)  # the menu itself runs nothing


def test_one_output_needs_no_menu():
    assert [o["label"] for o in options(finished(1))] == ["↻ New image for task 0", "✎ Edit the plan"]
    assert options(finished(1), seeds_open=True) == options(finished(1))
    assert [o["label"] for o in options(finished(0))] == ["✎ Edit the plan"]


def test_an_opened_menu_is_kept_under_the_last_answer():
    messages = [{"role": "user", "content": "draw"}, {"role": "assistant", "content": "done"}]
    folded = with_options(messages, options(finished(2, 1)))
    assert [o["value"] for o in folded[-1]["options"]] == [SEEDS_OPEN, EDIT_PLAN]
    assert "options" not in messages[-1]  # the conversation's own messages stay as they were
    opened = with_options(messages, options(finished(2, 1), seeds_open=True))
    assert [o["label"] for o in with_options(opened, options(finished(2, 1)))[-1]["options"]][1:4] == [
        "↻ New image for task 0",
        "↻ New image for task 1",
        "↻ New voice for task 2",
    ]
