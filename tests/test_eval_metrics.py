"""Planning metrics, data loading, the tool-name mapping and plan conversion, on our own fixtures.

Expected values are worked out by hand in the comments: they do not come from the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hugginggpt import tasks as task_types
from hugginggpt.eval.convert import plan_to_taskbench, taskbench_links, taskbench_to_plan
from hugginggpt.eval.data import DataError, load_dataset, parse_gold
from hugginggpt.eval.mapping import TASKBENCH_TO_PROJECT, to_project, to_taskbench
from hugginggpt.eval.metrics import METRICS, aggregate, evaluate_groups, score_sample
from hugginggpt.stages.plan import Plan, Task

FIXTURES = Path(__file__).parent / "fixtures" / "taskbench"
QUALITY = [k for k, _, _ in METRICS if not k.endswith(("_share", "_mean")) or k.endswith("f1_mean")]
DISTANCES = {"ned", "ned_pooled", "seq_ed", "seq_ed_pooled"}


@pytest.fixture(scope="module")
def dataset():
    return load_dataset(FIXTURES)


@pytest.fixture(scope="module")
def gold(dataset):
    return {s.id: s for s in dataset.samples}


def n(task, *arguments):
    return {"task": task, "arguments": list(arguments)}


def scored(gold_sample, pred, tools):
    return aggregate([score_sample(gold_sample, pred, tools)], tools)


# ------------------------------------------------------------------ data


def test_both_layouts_load_the_same_samples(dataset):
    layout_2024 = load_dataset(FIXTURES / "layout2024")
    assert dataset.gold_path.name == "data.json" and layout_2024.gold_path.name == "data.jsonl"
    assert [s.layout for s in dataset.samples] == ["2023"] * 8
    assert [s.layout for s in layout_2024.samples] == ["2024"] * 8
    for a, b in zip(dataset.samples, layout_2024.samples, strict=True):
        assert (a.id, a.request, a.shape, a.nodes, a.links, a.steps) == (
            b.id,
            b.request,
            b.shape,
            b.nodes,
            b.links,
            b.steps,
        )
    first = dataset.samples[0]
    assert (first.id, first.shape, first.n_tools) == ("10000001", "single", 1)
    assert first.nodes == [n("Image Classification", "example.jpg")]
    assert [s.shape for s in dataset.samples].count("dag") == 2
    # The requests file is where the request text comes from when present.
    assert dataset.requests_path is not None and dataset.requests_path.name == "user_requests.json"
    assert len(dataset.tools) == 23 and dataset.tools["Sentence Similarity"].output_type == "none"


def test_irregular_gold_records_are_normalised():
    record = {
        "id": 5,
        "instruction": "x",
        "tool_nodes": json.dumps(
            [
                {"task": "Translation", "arguments": [{"name": "text", "value": "hello"}]},
                {"task": "Summarization", "arguments": "<node-0>", "output": ["text"]},
            ]
        ),
        "tool_links": json.dumps([{"source": "Translation", "target": "Summarization"}]),
    }
    sample = parse_gold(record)
    assert sample.id == "5" and sample.layout == "2024"
    assert sample.nodes == [n("Translation", "hello"), n("Summarization", "<node-0>")]
    assert sample.shape == "chain"  # no "type" field: inferred from the references
    assert sample.links == [("Translation", "Summarization")]


def test_a_folder_without_gold_is_refused(tmp_path):
    (tmp_path / "tool_desc.json").write_text((FIXTURES / "tool_desc.json").read_text())
    with pytest.raises(DataError, match="no gold file"):
        load_dataset(tmp_path)


def test_malformed_data_files_are_reported_not_raised(tmp_path, capsys):
    """`python -m hugginggpt.eval` answers a broken data file with "error: <file>...", exit code 2."""
    from hugginggpt.eval.__main__ import main

    for name in ("tool_desc.json", "data.json", "user_requests.json"):
        (tmp_path / name).write_text((FIXTURES / name).read_text())
    cases = [
        ("tool_desc.json", '{"nodes": [{"id": "A"', "tool_desc.json: not a JSON tool list"),
        ("tool_desc.json", '{"nodes": [{"name": "A"}]}', "tool_desc.json, tool 1: not a TaskBench tool node"),
        ("data.json", '\n[{"id": 1,\n', "data.json, line 3: not JSON"),  # cut short after line 2
    ]
    for name, text, message in cases:
        original = (tmp_path / name).read_text()
        (tmp_path / name).write_text(text)
        assert main(["score", "--data", str(tmp_path), "--out", str(tmp_path / "run")]) == 2
        assert message in capsys.readouterr().err
        (tmp_path / name).write_text(original)


# ------------------------------------------------------------------ mapping and conversion


def test_mapping_covers_every_taskbench_tool(dataset):
    assert set(TASKBENCH_TO_PROJECT) == set(dataset.tools)
    for name in dataset.tools:
        assert to_project(name) in task_types.TASKS
        prompt = {"text": "make it blue"} if name == "Image Editing" else {}
        assert to_taskbench(to_project(name), prompt) == name
    assert to_project("Image_Editing") == "image-to-image"
    assert to_taskbench("image-to-image", {"image": "a.png"}) == "Image-to-Image"
    assert to_taskbench("image-to-image", {"image": "a.png", "text": "add a hat"}) == "Image Editing"
    assert to_taskbench("canny-control") is None
    assert all(
        to_taskbench(t) is None for t in ("text-classification", "canny-control", "text2text-generation")
    )


def test_our_plan_becomes_taskbench_nodes():
    plan = Plan(
        [
            Task(id=3, task="text-to-image", args={"text": "a red fox"}),
            Task(
                id=7,
                task="visual-question-answering",
                dep=[3],
                args={"text": "How many foxes?", "image": "<resource>-3"},
            ),
            Task(
                id=9,
                task="text-classification",
                dep=[7],
                args={"text": "about <resource>-7 and <resource>-4"},
            ),
        ]
    )
    nodes = plan_to_taskbench(plan)
    assert nodes == [
        n("Text-to-Image", "a red fox"),
        n("Visual Question Answering", "<node-0>", "How many foxes?"),  # the task table's argument order
        n("text-classification", "about <node-1> and <resource>-4"),  # no TaskBench tool; dangling ref kept
    ]
    assert taskbench_links(nodes) == [
        {"source": "Text-to-Image", "target": "Visual Question Answering"},
        {"source": "Visual Question Answering", "target": "text-classification"},
    ]
    assert plan_to_taskbench(None) == []


# ------------------------------------------------------------------ gold against gold


def test_gold_against_gold_is_perfect_on_every_metric(dataset):
    table = evaluate_groups([score_sample(s, s.nodes, dataset.tools) for s in dataset.samples], dataset.tools)
    assert set(table) == {
        "overall",
        "single",
        "chain",
        "dag",
        "tools=1",
        "tools=2",
        "tools=3",
        "tools=4",
        "answered",
        "answered:single",
        "answered:chain",
        "answered:dag",
        "answered:tools=1",
        "answered:tools=2",
        "answered:tools=3",
        "answered:tools=4",
    }
    for group, figures in table.items():
        for key in QUALITY:
            value = figures[key]
            if value is None:  # nothing to measure: edges of one-tool samples, accuracy of multi-tool ones
                one_tool = group.removeprefix("answered:") in ("single", "tools=1")
                assert (key.startswith("edge") and one_tool) or key == "single_acc"
                continue
            assert value == (0.0 if key in DISTANCES else 1.0), (group, key)
    assert table["overall"]["single_acc"] == 1.0 and table["single"]["samples"] == 3
    # Upstream's macro F1 averages over all 23 tools, so tools nobody used pull it down: the fixtures use 12
    assert table["overall"]["node_macro_f1_upstream"] == pytest.approx(12 / 23)


def test_gold_through_our_plan_format_and_back_is_perfect(dataset):
    scores = [
        score_sample(s, plan_to_taskbench(taskbench_to_plan(s.nodes, dataset.tools)), dataset.tools)
        for s in dataset.samples
    ]
    overall = aggregate(scores, dataset.tools)
    for key in QUALITY:
        assert overall[key] == (0.0 if key in DISTANCES else 1.0), key


# ------------------------------------------------------------------ crafted predictions

# Gold 10000005, listed alphabetically:
# [Image-to-Text(<node-1>), Text-to-Image(lighthouse), Text-to-Speech(<node-0>)]
# tool ids in tool_desc order: Image-to-Text 12, Text-to-Image 13, Text-to-Speech 19, Translation 2.
# Execution order: Text-to-Image, Image-to-Text, Text-to-Speech.
LIGHTHOUSE = "a lighthouse on a cliff at sunset"


def test_missing_node(dataset, gold):
    pred = [n("Text-to-Image", LIGHTHOUSE), n("Image-to-Text", "<node-0>")]
    m = scored(gold["10000005"], pred, dataset.tools)
    assert m["node_f1"] == pytest.approx(0.8)  # tp 2, fn 1: 4/5
    assert m["edge_f1"] == pytest.approx(2 / 3)  # (T2I, I2T) found, (I2T, TTS) missed
    assert m["arg_t_f1"] == pytest.approx(0.8) and m["arg_v_f1"] == pytest.approx(0.8)
    assert m["ned"] == pytest.approx(0.6)  # [13, 12] vs [12, 13, 19]: LCS 1, ratio 2/5
    assert (m["task_precision"], m["task_recall"], m["task_f1"]) == pytest.approx((1.0, 2 / 3, 0.8))
    assert m["seq_ed"] == pytest.approx(1 / 3)  # one deletion over 3


def test_extra_node(dataset, gold):
    pred = [
        n("Text-to-Image", LIGHTHOUSE),
        n("Image-to-Text", "<node-0>"),
        n("Text-to-Speech", "<node-1>"),
        n("Translation", "<node-1>"),
    ]
    m = scored(gold["10000005"], pred, dataset.tools)
    assert m["node_f1"] == pytest.approx(6 / 7)  # tp 3, fp 1
    assert m["edge_f1"] == pytest.approx(0.8)  # tp 2, fp 1 (I2T -> Translation)
    assert m["arg_t_f1"] == pytest.approx(6 / 7) and m["arg_v_f1"] == pytest.approx(6 / 7)
    assert m["ned"] == pytest.approx(3 / 7)  # [13, 12, 19, 2] vs [12, 13, 19]: LCS 2, ratio 4/7
    assert (m["task_precision"], m["task_recall"]) == pytest.approx((0.75, 1.0))
    assert m["seq_ed"] == pytest.approx(1 / 4)  # one insertion over 4


def test_wrong_edge(dataset, gold):
    # Text-to-Speech reads the drawing (node 0) instead of the caption.
    pred = [n("Text-to-Image", LIGHTHOUSE), n("Image-to-Text", "<node-0>"), n("Text-to-Speech", "<node-0>")]
    m = scored(gold["10000005"], pred, dataset.tools)
    assert m["node_f1"] == 1.0
    assert m["edge_f1"] == pytest.approx(0.5)  # tp 1, fp 1, fn 1
    # The argument is now named after Text-to-Image's output (image) and valued "Text-to-Image".
    assert m["arg_t_f1"] == pytest.approx(2 / 3) and m["arg_v_f1"] == pytest.approx(2 / 3)
    assert m["ned"] == pytest.approx(1 / 3)  # [13, 12, 19] vs [12, 13, 19]: LCS 2, ratio 4/6
    assert m["seq_ed"] == 0.0 and m["task_f1"] == 1.0


def test_wrong_argument(dataset, gold):
    pred = [
        n("Text-to-Image", "a lighthouse at night"),
        n("Image-to-Text", "<node-0>"),
        n("Text-to-Speech", "<node-1>"),
    ]
    m = scored(gold["10000005"], pred, dataset.tools)
    assert (m["node_f1"], m["edge_f1"], m["arg_t_f1"]) == (1.0, 1.0, 1.0)
    assert m["arg_v_f1"] == pytest.approx(2 / 3)  # tp 2, fp 1, fn 1
    assert m["seq_ed"] == 0.0


def test_reordered_sequence(dataset, gold):
    # Gold 10000004: ASR(example.wav) -> Summarization(<node-0>); tool ids 20 and 3.
    same_graph_other_listing = [
        n("Summarization", "<node-1>"),
        n("Automatic Speech Recognition", "example.wav"),
    ]
    m = scored(gold["10000004"], same_graph_other_listing, dataset.tools)
    assert (m["node_f1"], m["edge_f1"], m["arg_t_f1"], m["arg_v_f1"]) == (1.0, 1.0, 1.0, 1.0)
    assert m["ned"] == pytest.approx(0.5)  # TaskBench's is list order: [3, 20] vs [20, 3], ratio 2/4
    assert m["seq_ed"] == 0.0  # the paper's is execution order: the same

    reversed_steps = [n("Summarization", "example.wav"), n("Automatic Speech Recognition", "<node-0>")]
    m = scored(gold["10000004"], reversed_steps, dataset.tools)
    assert m["node_f1"] == 1.0 and m["task_f1"] == 1.0
    assert (m["edge_f1"], m["arg_t_f1"], m["arg_v_f1"]) == (0.0, 0.0, 0.0)
    assert m["ned"] == pytest.approx(0.5)
    assert m["seq_ed"] == pytest.approx(1.0)  # two substitutions over 2


def test_unknown_tool_names_count_as_upstream_and_paper_do(dataset, gold):
    pred = [n("Image Classification", "example.jpg"), n("Image Magic", "example.jpg")]
    m = scored(gold["10000001"], pred, dataset.tools)
    assert m["node_f1"] == 1.0  # upstream ignores names outside the tool list
    assert m["task_precision"] == pytest.approx(0.5) and m["task_f1"] == pytest.approx(2 / 3)
    assert m["arg_t_f1"] == pytest.approx(2 / 3)  # "Image Magic-image" is a false positive
    assert m["ned"] == pytest.approx(1 / 3)  # [10, 0] vs [10]: ratio 2/3
    assert m["single_acc"] == 0.0  # two tasks for a one-task request


def test_self_reference_is_dropped(dataset, gold):
    pred = [n("Automatic Speech Recognition", "example.wav"), n("Summarization", "<node-0>", "<node-1>")]
    m = scored(gold["10000004"], pred, dataset.tools)
    assert (m["edge_f1"], m["arg_v_f1"]) == (1.0, 1.0)


def test_pooled_and_per_sample_and_missing_predictions(dataset, gold):
    partial = score_sample(
        gold["10000005"], [n("Text-to-Image", LIGHTHOUSE), n("Image-to-Text", "<node-0>")], dataset.tools
    )
    missing = score_sample(gold["10000001"], None, dataset.tools)  # no prediction: an empty plan
    assert not missing.predicted
    table = evaluate_groups([partial, missing], dataset.tools)
    m = table["overall"]
    assert (m["samples"], m["predicted"]) == (2, 1)
    assert m["node_f1"] == pytest.approx(2 / 3)  # pooled tp 2, fn 1 + 1: 4/6
    assert m["node_f1_mean"] == pytest.approx(0.4)  # (0.8 + 0) / 2
    assert m["edge_f1"] == pytest.approx(2 / 3)  # the empty single adds no edge counts
    assert m["edge_f1_mean"] == pytest.approx((2 / 3 + 1.0) / 2)  # no edges on either side: 1.0
    assert m["ned"] == pytest.approx(0.8)  # (0.6 + 1.0) / 2
    assert m["ned_pooled"] == pytest.approx(2 / 3)  # 1 - (2 + 0) / (5 + 1)
    assert m["single_acc"] == 0.0
    assert table["answered"]["samples"] == 1 and table["answered"]["node_f1"] == pytest.approx(0.8)
    assert table["single"]["node_f1"] == 0.0 and table["chain"]["node_f1"] == pytest.approx(0.8)
    assert table["tools=3"]["samples"] == 1 and table["tools=1"]["samples"] == 1


def test_gold_plans_our_task_table_cannot_express_are_flagged(dataset):
    from hugginggpt.eval.data import GoldSample
    from hugginggpt.eval.score import gold_not_plannable

    # TaskBench's Tabular Classification reads an image; ours reads CSV text.
    odd = GoldSample(
        "1", "x", "chain", [n("Image-to-Image", "example.jpg"), n("Tabular Classification", "<node-0>")]
    )
    found = gold_not_plannable(dataset, [*dataset.samples, odd])
    assert [f["id"] for f in found] == ["1"]
    assert "tabular-classification" in found[0]["problem"] and "produces image" in found[0]["problem"]


def test_answered_groups_exist_per_shape_and_per_number_of_tools(dataset, gold):
    """Upstream scores only the samples that have a prediction, per shape and per number of tools
    too; the same groups over every sample count a missing prediction as an empty plan."""
    chain_answered = score_sample(gold["10000004"], gold["10000004"].nodes, dataset.tools)  # chain, 2 tools
    chain_missing = score_sample(gold["10000005"], None, dataset.tools)  # chain, 3 tools
    single_answered = score_sample(gold["10000001"], [n("Translation", "x")], dataset.tools)  # wrong tool
    table = evaluate_groups([chain_answered, chain_missing, single_answered], dataset.tools)
    # Over every sample, the chains pool tp 2 and fn 3: 2·2 / (2·2 + 3) = 4/7. Answered only: perfect.
    assert table["chain"]["node_f1"] == pytest.approx(4 / 7)
    assert table["answered:chain"]["samples"] == 1 and table["answered:chain"]["node_f1"] == 1.0
    assert table["answered:single"]["node_f1"] == 0.0
    assert table["answered:tools=2"]["samples"] == 1 and table["answered:tools=2"]["edge_f1"] == 1.0
    assert "answered:tools=3" not in table  # its only sample has no prediction
    assert table["tools=3"]["node_f1"] == 0.0
    assert table["answered"]["samples"] == 2


def test_arguments_given_as_name_value_objects_are_scored_by_value(tmp_path):
    """TaskBench's other domains write arguments as {"name": ..., "value": ...}; `score` read
    them as strings and stopped with a TypeError."""
    from hugginggpt.eval.__main__ import main

    run = tmp_path / "run"
    run.mkdir()
    nodes = [
        {"task": "Automatic Speech Recognition", "arguments": [{"name": "audio", "value": "example.wav"}]},
        {"task": "Summarization", "arguments": [{"name": "text", "value": "<node-0>"}]},
    ]
    record = {"id": "10000004", "result": {"task_nodes": nodes}}
    (run / "predictions.jsonl").write_text(json.dumps(record) + "\n")
    assert main(["score", "--data", str(FIXTURES), "--out", str(run)]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    row = next(r for r in metrics["per_sample"] if r["id"] == "10000004")
    assert (row["node_f1"], row["edge_f1"], row["arg_t_f1"], row["arg_v_f1"]) == (1.0, 1.0, 1.0, 1.0)
    assert metrics["groups"]["answered:chain"]["arg_v_f1"] == 1.0


def test_deliberate_differences_from_upstream_are_documented_and_hold(dataset, gold):
    from hugginggpt.eval import metrics

    doc = metrics.__doc__
    assert "deliberately differs from upstream's evaluate.py" in doc
    for phrase in (
        "at both ends of an edge",
        "read as a literal text argument",
        '(shown "n/a")',
        "by its value",
    ):
        assert phrase in doc, phrase
    # Underscored names on both ends of an edge still match the gold's edge.
    underscored = [n("Automatic_Speech_Recognition", "example.wav"), n("Summarization", "<node-0>")]
    assert scored(gold["10000004"], underscored, dataset.tools)["edge_f1"] == 1.0
    # A reference to a node the plan does not have is a literal text argument, not an edge.
    dangling = score_sample(
        gold["10000004"],
        [n("Automatic Speech Recognition", "example.wav"), n("Summarization", "<node-5>")],
        dataset.tools,
    )
    assert dangling.edge.tp == 0 and dangling.edge.fn == 1 and dangling.edge.fp == 0
    assert dangling.arg_name.tp == 2  # named "text", as the gold's reference to ASR's text output
    # No edges on either side of a group: no edge F1 at all, shown as "n/a".
    single = aggregate([score_sample(gold["10000001"], gold["10000001"].nodes, dataset.tools)])
    assert single["edge_f1"] is None and metrics.format_value("edge_f1", single["edge_f1"]) == "n/a"
