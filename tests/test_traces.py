"""The one trace reader (hugginggpt/run/traces.py): a trace file in, typed values out, and a clear
ValueError for anything that is no trace that can run again."""

from __future__ import annotations

import json

import pytest

from hugginggpt.catalog import Catalog
from hugginggpt.files.bounded_file import FileRefused
from hugginggpt.run.traces import read_trace

TRACE = {
    "request_id": "r-1",
    "request": "say hi, then say it again",
    "plan": [
        {"task": "text-generation", "id": 0, "dep": [-1], "args": {"text": "hi"}},
        {"task": "text-generation", "id": 1, "dep": [0], "args": {"text": "<resource>-0"}},
        {"task": "text-generation", "id": 2, "dep": [-1], "args": {"text": "bye"}},
    ],
    "choices": {
        "0": {"model": "org/chosen", "seed": 5},
        "1": {"model": "org/planned", "seed": 6},
    },
    "tasks": [
        {
            "id": 0,
            "status": "done",
            "model": "org/ran",
            "seed": 7,
            "outputs": [{"kind": "text", "sha256": "ab"}],
        },
        {"id": 1, "status": "failed", "model": "org/planned", "seed": 6, "outputs": []},
    ],
}


def write(tmp_path, value):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_a_trace_reads_into_its_request_plan_models_seeds_and_hashes(tmp_path):
    trace = read_trace(write(tmp_path, TRACE), Catalog([]))
    assert trace.request_id == "r-1" and trace.request == TRACE["request"]
    assert [t.id for t in trace.given.plan.tasks] == [0, 1, 2]
    choices = trace.given.choices
    # the model that produced the outputs wins over the chosen one; a failed task keeps its choice
    assert choices[0].model and choices[0].model.id == "org/ran" and choices[0].seed == 7
    assert choices[1].model and choices[1].model.id == "org/planned" and choices[1].seed == 6
    assert choices[2].model is None  # no model ran it: it fails again, with no selection call
    assert trace.given.seeds == {0: 7, 1: 6}
    assert trace.recorded == {0: (("text", "ab"),)}  # only tasks that finished have hashes


@pytest.mark.parametrize(
    "content, words",
    [
        ({"request": "no plan"}, "is not a trace with a plan"),
        ([1, 2], "is not a trace with a plan"),
        ({"plan": [{"task": "<b>x</b>", "id": 0, "dep": [-1], "args": {}}]}, "unknown task type"),
    ],
)
def test_what_is_no_trace_is_a_clear_value_error(tmp_path, content, words):
    with pytest.raises(ValueError, match=words):
        read_trace(write(tmp_path, content), Catalog([]))


def test_a_trace_over_the_size_bound_is_refused_before_it_is_parsed(tmp_path):
    with pytest.raises(FileRefused, match="over the limit of 100"):
        read_trace(write(tmp_path, TRACE), Catalog([]), max_bytes=100)
