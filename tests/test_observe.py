"""observe.observed: observers see every event of a run in order, Done once, are closed once however
the listener stops, and a listener that stops early stops the run."""

from __future__ import annotations

from contextlib import contextmanager

from hugginggpt.observability.observers import Observer, observed
from hugginggpt.run.events import AnswerDelta, Done, Outcome, Stage, StageStarted


class Recorder(Observer):
    def __init__(self) -> None:
        self.log: list[str] = []

    @contextmanager
    def working(self):
        self.log.append("work")
        yield
        self.log.append("rest")

    def seen(self, event) -> None:
        self.log.append(type(event).__name__)

    def closed(self) -> None:
        self.log.append("closed")


def run(log: list[str]):
    try:
        yield StageStarted(Stage.RESPOND)
        log.append("run: answering")  # while the observers are working
        yield AnswerDelta("hi")
        yield Done(Outcome.ANSWERED, answer="hi")
    finally:
        log.append("run: closed")


def test_observers_see_each_event_while_working_and_done_once():
    recorder, dones, log = Recorder(), [], []
    events = list(observed(run(log), recorder, on_done=dones.append))
    assert [type(e).__name__ for e in events] == ["StageStarted", "AnswerDelta", "Done"]
    assert dones == [events[-1]]
    assert recorder.log == [
        *("work", "StageStarted", "rest"),
        *("work", "AnswerDelta", "rest"),
        *("work", "Done", "rest"),
        *("work", "rest", "closed"),  # the run's end is asked for while working too
    ]
    assert log == ["run: answering", "run: closed"]


def test_a_listener_that_stops_early_closes_the_observers_and_stops_the_run():
    recorder, dones, log = Recorder(), [], []
    events = observed(run(log), recorder, on_done=dones.append)
    assert isinstance(next(events), StageStarted)
    events.close()
    assert recorder.log[-1] == "closed" and recorder.log.count("closed") == 1
    assert dones == [] and log == ["run: closed"]  # no Done seen; the run was closed, not drained


def test_without_observers_the_events_pass_untouched():
    events = run([])
    assert observed(events) is events
