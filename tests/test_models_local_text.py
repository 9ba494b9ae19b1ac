"""Text and tabular tasks through models_local.run on tiny random-weight models loaded by path."""

from __future__ import annotations

import json

import pytest
from stop_signal import StopAfter

import models_local
from hugginggpt.tasks import TASKS
from models_local import RuntimeUnsupported


def run(task, folder, inputs, out):
    artifacts = models_local.run(task, folder, inputs, out)
    kinds = {a["kind"] for a in artifacts}
    assert set(TASKS[task].outputs) <= kinds, f"{task} must produce {TASKS[task].outputs}, got {kinds}"
    for a in artifacts:
        json.dumps(a)  # artifacts cross to the controller as JSON
    return {a["kind"]: a.get("value", a.get("path")) for a in artifacts}


def test_text_classification(tiny, tmp_path):
    got = run("text-classification", tiny("bert-classifier"), {"text": "the cat sat on the mat"}, tmp_path)
    labels = got["data"]
    assert {item["label"] for item in labels} == {"negative", "neutral", "positive"}
    assert sum(item["score"] for item in labels) == pytest.approx(1.0, abs=1e-3)
    assert [item["score"] for item in labels] == sorted((item["score"] for item in labels), reverse=True)
    assert got["text"].startswith(labels[0]["label"])


def test_token_classification(tiny, tmp_path):
    text = "hello paris is in france"
    entities = run("token-classification", tiny("bert-tagger"), {"text": text}, tmp_path)["data"]
    assert entities, "random weights tag something"
    for e in entities:
        assert e["entity"] in {"PER", "LOC"}  # B-/I- pieces grouped, O dropped
        assert text[e["start"] : e["end"]] == e["word"]
        assert 0 < e["score"] <= 1


def test_question_answering_returns_a_span_of_the_context(tiny, tmp_path):
    context = "paris is in france. " * 40 + "the cat sat on the mat."  # longer than one 128-token window
    got = run(
        "question-answering", tiny("bert-qa"), {"text": "where is paris?", "context": context}, tmp_path
    )
    data = got["data"]
    assert data["answer"] == got["text"] == context[data["start"] : data["end"]]
    assert 0 <= data["start"] < data["end"] <= len(context)
    assert 0 < data["score"] <= 1


def test_sentence_similarity(tiny, tmp_path):
    folder = tiny("bert-embedder")
    same = run("sentence-similarity", folder, {"text": "the cat sat", "text2": "the cat sat"}, tmp_path)
    other = run("sentence-similarity", folder, {"text": "the cat sat", "text2": "where is france?"}, tmp_path)
    assert same["data"]["similarity"] == pytest.approx(1.0, abs=1e-4)
    assert same["data"]["pooling"] == "mean"  # read from the sentence-transformers pooling module
    assert -1 <= other["data"]["similarity"] < same["data"]["similarity"]


def test_sentence_similarity_applies_pooling_and_dense_modules(tiny, tmp_path):
    """A sentence-transformers folder with CLS pooling and a Dense layer: the embedding is the stack."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = tiny("bert-embedder-dense")
    got = run("sentence-similarity", folder, {"text": "the cat sat", "text2": "where is france?"}, tmp_path)
    assert got["data"]["pooling"] == "cls" and got["data"]["dense_layers"] == 1
    # the same stack computed by hand, from the files
    from safetensors.torch import load_file

    tok, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    weights = load_file(f"{folder}/2_Dense/model.safetensors")
    with torch.no_grad():
        cls = model(
            **tok(["the cat sat", "where is france?"], padding=True, return_tensors="pt")
        ).last_hidden_state[:, 0]
        emb = torch.tanh(cls @ weights["linear.weight"].T + weights["linear.bias"])
    expected = torch.nn.functional.cosine_similarity(emb[0:1], emb[1:2]).item()
    assert got["data"]["similarity"] == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("task", ["text2text-generation", "summarization", "translation"])
def test_seq2seq_tasks_generate_text(tiny, tmp_path, task):
    got = run(task, tiny("t5"), {"text": "the cat sat on the mat"}, tmp_path)
    assert isinstance(got["text"], str)


def test_seq2seq_task_prefix_comes_from_the_config(tiny):
    from transformers import AutoConfig

    from models_local.handlers.text import _task_prefix

    config = AutoConfig.from_pretrained(tiny("t5"))
    assert _task_prefix(config, "summarization") == "summarize: "
    assert _task_prefix(config, "translation") == "translate English to German: "
    assert _task_prefix(config, "text2text-generation") == ""


def test_text_generation_continues_the_prompt(tiny, tmp_path):
    got = run("text-generation", tiny("gpt2"), {"text": "hello world"}, tmp_path)
    assert got["text"].startswith("hello world") and len(got["text"]) > len("hello world")


def test_conversational_uses_the_chat_template(tiny, tmp_path):
    from transformers import AutoTokenizer

    folder = tiny("llama-chat")
    assert AutoTokenizer.from_pretrained(folder).chat_template  # the template travelled with the tokenizer
    reply = run("conversational", folder, {"text": "hello who is there?"}, tmp_path)["text"]
    assert isinstance(reply, str) and "user:" not in reply  # the reply only, not the templated prompt


def test_conversational_without_a_chat_template_replies_after_end_of_text(tiny, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = tiny("gpt2")  # DialoGPT style: a GPT-2 without a chat template
    reply = run("conversational", folder, {"text": "hello world"}, tmp_path)["text"]
    tok, model = AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder)
    prompt = tok("hello world" + tok.eos_token, return_tensors="pt")
    ids = model.generate(**prompt, max_new_tokens=16, pad_token_id=tok.eos_token_id)
    assert reply == tok.decode(ids[0][prompt["input_ids"].shape[-1] :], skip_special_tokens=True).strip()


@pytest.mark.parametrize(
    "task,name",
    [
        ("summarization", "t5"),
        ("translation", "t5"),
        ("text-generation", "gpt2"),
        ("conversational", "llama-chat"),
    ],
)
def test_a_stop_ends_generation_at_the_next_token(tiny, tmp_path, task, name):
    stop = StopAfter(1)  # the runtime's check before the call passes; generate()'s first check stops it
    with pytest.raises(models_local.Stopped):
        models_local.run(task, tiny(name), {"text": "the cat sat on the mat"}, tmp_path, stop=stop)
    assert stop.asked >= 2  # it was generate() that looked, not only the check before the call


def test_conversational_with_an_encoder_decoder_model(tiny, tmp_path):
    assert isinstance(run("conversational", tiny("t5"), {"text": "hello"}, tmp_path)["text"], str)


def test_wrong_architecture_for_the_task_is_unsupported(tiny, tmp_path):
    with pytest.raises(RuntimeUnsupported, match="cannot load"):  # VITS has no seq2seq head
        models_local.run("summarization", tiny("vits"), {"text": "a cat"}, tmp_path)


# ---- tabular -------------------------------------------------------------------------------------

ROWS = "petal_width,sepal_length,sepal_width,petal_length\n1.1,0.9,1.0,1.2\n5,5.1,4.9,5\n"  # columns shuffled


def test_tabular_classification_with_a_skops_model(tiny, tmp_path):
    pytest.importorskip("skops")
    got = run("tabular-classification", tiny("sklearn-skops"), {"text": ROWS}, tmp_path)
    rows = got["data"]
    assert [r["label"] for r in rows] == ["setosa", "virginica"]  # columns matched by name, not position
    assert all(r["score"] > 0.5 and set(r["scores"]) == {"setosa", "virginica"} for r in rows)
    assert got["text"].startswith("row 1: setosa")


def test_tabular_refuses_pickles_unless_trusted(tiny, tmp_path, monkeypatch):
    pytest.importorskip("skops")
    folder = tiny("sklearn-pickle")
    with pytest.raises(RuntimeUnsupported, match="pickle"):
        models_local.run("tabular-classification", folder, {"text": ROWS}, tmp_path)
    monkeypatch.setenv("HUGGINGGPT_TRUST_PICKLE", "1")
    got = run("tabular-classification", folder, {"text": ROWS}, tmp_path)
    assert [r["label"] for r in got["data"]] == ["setosa", "virginica"]


def test_tabular_rejects_a_table_without_the_model_columns(tiny, tmp_path):
    pytest.importorskip("skops")
    with pytest.raises(ValueError, match="columns"):
        models_local.run("tabular-classification", tiny("sklearn-skops"), {"text": "a,b\n1,2\n"}, tmp_path)
    assert not models_local.can_run("tabular-classification", tiny("sklearn-skops"), library="keras")
    assert models_local.can_run("tabular-classification", tiny("sklearn-skops"), library="skops")


@pytest.mark.parametrize(
    "task,name,inputs",
    [
        ("question-answering", "bert-qa", {"text": "where is paris?", "context": "paris is in france"}),
        ("sentence-similarity", "bert-embedder-dense", {"text": "the cat sat", "text2": "the cat sat"}),
        ("conversational", "llama-chat", {"text": "hello"}),
    ],
)
def test_half_precision_paths(tiny, tmp_path, task, name, inputs):
    """What a GPU runs: float16 weights, inputs cast to match (here on CPU)."""
    import torch

    from models_local import Runtime
    from models_local.handlers.base import Device

    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    runtime.device = Device("cpu", torch.float16)
    artifacts = runtime.run(task, tiny(name), inputs, tmp_path)
    assert set(TASKS[task].outputs) <= {a["kind"] for a in artifacts}
    (entry,) = runtime._cache.entries.values()
    assert entry.obj.model.dtype == torch.float16
