"""The answer path's depth (issue 31), read from a real chat run's stacks at its first task
(tests/answer_path_probe.py): the chat's submit follows the run that the scheduler's thread drives,
with no thread between them that only relays events, and no web-layer generator frame that only
passes them on."""

from answer_path_probe import answer_path, measure


def test_the_chat_s_submit_reaches_the_scheduler_through_one_hand_off():
    path = answer_path(measure())
    submit, *others = path
    assert "engine.respond" in submit.frames and "live_runs.follow" in submit.generators
    assert any("task_graph.run" in t.generators for t in others)
    assert len(path) == 2, [t.frames for t in path]  # the submit's thread and the driver's: one hand-off
    assert submit.generators == ("engine.respond", "live_runs.follow")  # a browser's run, followed
