"""Text tasks on transformers models, called through the model classes.

transformers 5 dropped the summarization, translation, text2text and question-answering pipelines,
so those (and most others, for one code style) load an Auto model class and call it directly.
Token classification keeps the pipeline: its entity grouping over sub-words is worth reusing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models_local.handlers.base import Device, Handler, Outputs, RuntimeUnsupported, seeded, stopping_criteria
from models_local.handlers.bundle import Bundle, load_model, tensors_to
from models_local.handlers.labels import write_labels

MAX_NEW_TOKENS = 128  # generated text per call; enough for a chat reply or a summary


def _max_length(tokenizer: Any, config: Any) -> int:
    # tokenizers without a saved limit report a huge model_max_length; trust the positions instead
    limit = getattr(config, "max_position_embeddings", None) or 512
    return int(min(tokenizer.model_max_length or limit, limit))


def _tokenizer(folder: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def _generate_kwargs(model: Any, tokenizer: Any) -> dict:
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    # a model's own max_new_tokens wins; its max_length (often the library default of 20) does not
    limit = getattr(model.generation_config, "max_new_tokens", None) or MAX_NEW_TOKENS
    return {"max_new_tokens": limit, "pad_token_id": pad}


# ---- text-classification -------------------------------------------------------------------------


def _load_classifier(folder: str, device: Device) -> Bundle:
    return Bundle(
        load_model("AutoModelForSequenceClassification", folder, device), _tokenizer(folder), device
    )


def _classify(b: Bundle, inputs: dict[str, str], out: Outputs) -> None:
    import torch

    enc = b.processor(
        inputs["text"],
        truncation=True,
        max_length=_max_length(b.processor, b.model.config),
        return_tensors="pt",
    )
    with torch.inference_mode():
        logits = b.model(**tensors_to(enc, b.device)).logits[0]
    write_labels(out, logits, b.model.config)


# ---- token-classification ------------------------------------------------------------------------


def _load_tagger(folder: str, device: Device) -> Bundle:
    from transformers import pipeline

    model = load_model("AutoModelForTokenClassification", folder, device)
    tokenizer = _tokenizer(folder)
    # "simple" groups sub-words into whole entities; it needs a fast tokenizer's offsets
    strategy = "simple" if getattr(tokenizer, "is_fast", False) else "none"
    tagger = pipeline(
        "token-classification",
        model=model,
        tokenizer=tokenizer,
        device=model.device,
        aggregation_strategy=strategy,
    )
    return Bundle(model, tokenizer, device, extra=tagger)


def _tag(b: Bundle, inputs: dict[str, str], out: Outputs) -> None:
    entities = []
    for e in b.extra(inputs["text"]):
        entities.append(
            {
                "entity": str(e.get("entity_group") or e.get("entity")),
                "word": str(e["word"]),
                "score": round(float(e["score"]), 4),
                "start": None if e.get("start") is None else int(e["start"]),
                "end": None if e.get("end") is None else int(e["end"]),
            }
        )
    out.text("; ".join(f"{e['word']} ({e['entity']})" for e in entities) or "no entities found")
    out.data(entities)


# ---- seq2seq: text2text-generation, summarization, translation (and encoder-decoder chat) --------


def _load_seq2seq(folder: str, device: Device) -> Bundle:
    model = load_model("AutoModelForSeq2SeqLM", folder, device)
    tokenizer = _tokenizer(folder)
    # extra: the generate() arguments a translation adds (the target language token), found once here
    return Bundle(model, tokenizer, device, extra=_english_bos(model, tokenizer))


def _task_prefix(config: Any, task: str) -> str:
    """T5-style models name a prompt prefix per task in config.task_specific_params."""
    params = getattr(config, "task_specific_params", None) or {}
    if task == "translation":
        keys = sorted(k for k in params if k.startswith("translation"))
        return params[keys[0]].get("prefix", "") if keys else ""
    return (params.get(task) or {}).get("prefix", "")


def _english_bos(model: Any, tok: Any) -> dict:
    """Many-to-many translation models need the target language as the first token: English."""
    if getattr(model.config, "model_type", "") not in ("m2m_100", "mbart", "nllb-moe", "seamless_m4t"):
        return {}
    vocab = tok.get_vocab()
    for code in ("eng_Latn", "__en__", "en_XX"):
        if code in vocab:
            return {"forced_bos_token_id": vocab[code]}
    return {}


def _seq2seq(task: str):
    def call(b: Bundle, inputs: dict[str, str], out: Outputs) -> None:
        import torch

        text = _task_prefix(b.model.config, task) + inputs["text"]
        enc = b.processor(
            text, truncation=True, max_length=_max_length(b.processor, b.model.config), return_tensors="pt"
        )
        kwargs = _generate_kwargs(b.model, b.processor) | ((b.extra or {}) if task == "translation" else {})
        with torch.inference_mode(), seeded(inputs):
            ids = b.model.generate(**tensors_to(enc, b.device), **kwargs, **stopping_criteria(out))
        out.check_stop()
        out.text(b.processor.decode(ids[0], skip_special_tokens=True).strip())

    return call


# ---- text-generation and conversational ----------------------------------------------------------


def _load_generator(folder: str, device: Device) -> Bundle:
    from transformers import AutoConfig

    if getattr(AutoConfig.from_pretrained(folder), "is_encoder_decoder", False):  # e.g. BlenderBot
        return _load_seq2seq(folder, device)
    return Bundle(load_model("AutoModelForCausalLM", folder, device), _tokenizer(folder), device)


def _generator(task: str):
    def call(b: Bundle, inputs: dict[str, str], out: Outputs) -> None:
        import torch

        tok = b.processor
        if b.model.config.is_encoder_decoder:
            _seq2seq("text2text-generation")(b, inputs, out)
            return
        chat = bool(getattr(tok, "chat_template", None))
        if chat:  # instruction-tuned: the prompt is a user turn, the output is the assistant's reply
            enc = tok.apply_chat_template(
                [{"role": "user", "content": inputs["text"]}],
                add_generation_prompt=True,
                return_tensors="pt",
                return_dict=True,
            )
        elif task == "conversational" and tok.eos_token:  # DialoGPT style: turns separated by end-of-text
            enc = tok(inputs["text"] + tok.eos_token, return_tensors="pt")
        else:  # a base model continues the prompt
            enc = tok(inputs["text"], return_tensors="pt")
        with torch.inference_mode(), seeded(inputs):  # a seed matters when the model samples
            ids = b.model.generate(
                **tensors_to(enc, b.device), **_generate_kwargs(b.model, tok), **stopping_criteria(out)
            )
        out.check_stop()
        new = tok.decode(ids[0][enc["input_ids"].shape[-1] :], skip_special_tokens=True)
        # a reply stands alone; a continuation is returned with its prompt, as the HF pipeline does
        out.text(new.strip() if chat or task == "conversational" else inputs["text"] + new)

    return call


# ---- question-answering --------------------------------------------------------------------------

MAX_ANSWER_TOKENS = 30


def _load_qa(folder: str, device: Device) -> Bundle:
    return Bundle(load_model("AutoModelForQuestionAnswering", folder, device), _tokenizer(folder), device)


def _answer(b: Bundle, inputs: dict[str, str], out: Outputs) -> None:
    import torch

    question, context = inputs["text"], inputs["context"]
    max_len = min(_max_length(b.processor, b.model.config), 512)
    # Long contexts are split into overlapping windows; the best span over all windows wins.
    enc = b.processor(
        question,
        context,
        truncation="only_second",
        max_length=max_len,
        stride=max_len // 4,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=True,
        return_tensors="pt",
    )
    offsets = enc.pop("offset_mapping")
    windows = len(enc["input_ids"])
    sequence_ids = [enc.sequence_ids(i) for i in range(windows)]
    enc.pop("overflow_to_sample_mapping", None)
    with torch.inference_mode():
        result = b.model(**tensors_to(enc, b.device))
    best: tuple[float, int, int] | None = None  # (score, start char, end char)
    for w in range(windows):
        in_context = torch.tensor([s == 1 for s in sequence_ids[w]])
        start = torch.softmax(result.start_logits[w].float().cpu().masked_fill(~in_context, -1e4), -1)
        end = torch.softmax(result.end_logits[w].float().cpu().masked_fill(~in_context, -1e4), -1)
        pair = start[:, None] * end[None, :]
        pair = torch.triu(pair) - torch.triu(pair, diagonal=MAX_ANSWER_TOKENS)  # start <= end < start + N
        top, flat = pair.flatten().max(0)
        s, e = divmod(int(flat), pair.shape[1])
        if best is None or float(top) > best[0]:
            best = (float(top), int(offsets[w][s][0]), int(offsets[w][e][1]))
    assert best is not None  # the tokenizer gives at least one window
    score, start_char, end_char = best
    answer = context[start_char:end_char]
    out.text(answer)
    out.data({"answer": answer, "score": round(score, 4), "start": start_char, "end": end_char})


# ---- sentence-similarity -------------------------------------------------------------------------


@dataclass
class Head:
    """What a sentence-transformers folder puts after the encoder: pooling, then optional Dense layers."""

    pooling: str = "mean"  # mean | cls | max
    dense: list[Any] = field(default_factory=list)  # torch modules applied to the pooled vector


def _dense(folder: Path, device: Device) -> Any:
    """A sentence-transformers Dense module (linear + activation) as a torch module, weights read safely."""
    import torch

    settings = json.loads((folder / "config.json").read_text())
    linear = torch.nn.Linear(
        settings["in_features"], settings["out_features"], bias=settings.get("bias", True)
    )
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        state = load_file(str(folder / "model.safetensors"))
    else:
        state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    linear.load_state_dict({k.removeprefix("linear."): v for k, v in state.items()})
    name = settings.get("activation_function", "torch.nn.modules.linear.Identity").rsplit(".", 1)[-1]
    activation = getattr(torch.nn, name, None)
    if activation is None or not name[0].isupper():
        raise RuntimeUnsupported(f"unknown Dense activation {settings.get('activation_function')!r}")
    return torch.nn.Sequential(linear, activation()).to(device.name, device.dtype).eval()


def _head(folder: str, device: Device) -> Head:
    """Read modules.json of a sentence-transformers folder; plain models get mean pooling."""
    head = Head()
    modules = Path(folder) / "modules.json"
    if not modules.is_file():
        return head
    for module in json.loads(modules.read_text()):
        kind, path = module.get("type", ""), Path(folder) / module.get("path", "")
        if kind.endswith("Pooling"):
            settings = json.loads((path / "config.json").read_text())
            if settings.get("pooling_mode_cls_token"):
                head.pooling = "cls"
            elif settings.get("pooling_mode_max_tokens"):
                head.pooling = "max"
        elif kind.endswith("Dense"):
            head.dense.append(_dense(path, device))
    return head


def _load_embedder(folder: str, device: Device) -> Bundle:
    model = load_model("AutoModel", folder, device)
    if getattr(model.config, "is_encoder_decoder", False):  # sentence-T5: the encoder makes the embedding
        model = model.get_encoder()
    return Bundle(model, _tokenizer(folder), device, extra=_head(folder, device))


def _similarity(b: Bundle, inputs: dict[str, str], out: Outputs) -> None:
    import torch

    enc = b.processor(
        [inputs["text"], inputs["text2"]],
        padding=True,
        truncation=True,
        max_length=_max_length(b.processor, b.model.config),
        return_tensors="pt",
    )
    enc = tensors_to(enc, b.device)
    head: Head = b.extra
    with torch.inference_mode():
        hidden = b.model(**enc).last_hidden_state
        mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        if head.pooling == "cls":
            emb = hidden[:, 0]
        elif head.pooling == "max":
            emb = hidden.masked_fill(mask == 0, -1e4).max(1).values
        else:
            emb = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-4)
        for layer in head.dense:
            emb = layer(emb)
    emb = emb.float()
    score = float(torch.nn.functional.cosine_similarity(emb[0:1], emb[1:2]).item())
    out.text(f"cosine similarity: {score:.4f}")
    out.data({"similarity": round(score, 6), "pooling": head.pooling, "dense_layers": len(head.dense)})


HANDLERS: dict[str, Handler] = {
    "text-classification": Handler(_load_classifier, _classify),
    "token-classification": Handler(_load_tagger, _tag),
    "text2text-generation": Handler(_load_seq2seq, _seq2seq("text2text-generation")),
    "summarization": Handler(_load_seq2seq, _seq2seq("summarization")),
    "translation": Handler(_load_seq2seq, _seq2seq("translation")),
    "question-answering": Handler(_load_qa, _answer),
    "conversational": Handler(_load_generator, _generator("conversational")),
    "text-generation": Handler(_load_generator, _generator("text-generation")),
    "sentence-similarity": Handler(_load_embedder, _similarity),
}
