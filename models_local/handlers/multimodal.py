"""Image + text models: captioning, visual question answering, document question answering.

transformers 5 removed the visual-question-answering and image-to-text pipelines, so these call the
model classes. One loader covers three kinds of model:
- answer classifiers (ViLT): logits over a fixed answer list;
- generators with a plain processor (BLIP, GIT, Pix2Struct, VisionEncoderDecoder such as ViT-GPT2 or
  TrOCR): the processor takes the image and, for a question, the question text;
- chat VLMs (LLaVA-style, any processor with a chat template): the question goes in a chat message.
Document QA adds Donut (OCR-free, prompted with its task tokens). LayoutLM-style models need OCR words
and boxes (tesseract), which this runtime does not run: they are refused, so the caller falls back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from models_local.handlers.base import (
    Batching,
    Device,
    Everyone,
    Handler,
    Outputs,
    RuntimeUnsupported,
    stopping_criteria,
)
from models_local.handlers.bundle import tensors_to
from models_local.io import read_image

MAX_NEW_TOKENS = 48  # enough for a caption or a short answer
CAPTION_PROMPT = "Describe this image in one sentence."
OCR_MODELS = ("layoutlm", "layoutlmv2", "layoutlmv3")  # model_type values that need OCR input
MAX_BATCH = 16  # pictures captioned at once


@dataclass
class VisionLanguage:
    model: Any
    processor: Any  # a processor, or an image processor when the repo has no combined one
    tokenizer: Any  # decodes generated ids
    device: Device
    kind: str  # classify | generate | chat | donut


def load(source: str, device: Device, *, task: str) -> VisionLanguage:
    from transformers import (
        AutoConfig,
        AutoImageProcessor,
        AutoModelForImageTextToText,
        AutoModelForVisualQuestionAnswering,
        AutoProcessor,
        AutoTokenizer,
        PreTrainedTokenizerBase,
    )
    from transformers.models.auto.modeling_auto import MODEL_FOR_VISUAL_QUESTION_ANSWERING_MAPPING_NAMES

    config = AutoConfig.from_pretrained(source)
    if config.model_type in OCR_MODELS:
        raise RuntimeUnsupported(
            f"{config.model_type} models need OCR words and boxes (tesseract), which "
            "the local runtime does not provide; use an OCR-free model (Donut, a "
            "vision-language model)"
        )
    if (
        task == "visual-question-answering"
        and config.model_type in MODEL_FOR_VISUAL_QUESTION_ANSWERING_MAPPING_NAMES
    ):
        model = AutoModelForVisualQuestionAnswering.from_pretrained(source, dtype=device.dtype)
    else:
        model = AutoModelForImageTextToText.from_pretrained(source, dtype=device.dtype)
    model = model.to(device.name).eval()
    processor = AutoProcessor.from_pretrained(source)
    if isinstance(processor, PreTrainedTokenizerBase):  # no combined processor (ViT-GPT2 and the like)
        processor = AutoImageProcessor.from_pretrained(source)
    tokenizer = getattr(processor, "tokenizer", None) or AutoTokenizer.from_pretrained(source)

    encoder = getattr(config, "encoder", None)
    if not model.can_generate():
        kind = "classify"
    elif encoder is not None and encoder.model_type == "donut-swin":
        kind = "donut"
    elif getattr(processor, "chat_template", None):
        kind = "chat"
    else:
        kind = "generate"
    if task == "document-question-answering" and kind == "classify":
        raise RuntimeUnsupported("document QA needs a generative model here")
    return VisionLanguage(model, processor, tokenizer, device, kind)


def ask(vl: VisionLanguage, image: Any, question: str | None, out: Outputs) -> tuple[str, list[dict] | None]:
    """The model's answer (a caption when `question` is None), and scored candidates for classifiers.
    Generation ends early, raising Stopped, once `out.stop` is set."""
    import torch

    if vl.kind == "classify":
        enc = vl.processor(images=image, text=question or "", return_tensors="pt")
        with torch.inference_mode():
            probs = vl.model(**tensors_to(enc, vl.device)).logits.float().sigmoid()[0]
        labels = vl.model.config.id2label
        top = probs.topk(min(5, probs.numel()))
        answers = [{"answer": labels[int(i)], "score": round(float(s), 4)} for s, i in zip(*top, strict=True)]
        return answers[0]["answer"], answers

    if vl.kind == "chat":
        content = [{"type": "image"}, {"type": "text", "text": question or CAPTION_PROMPT}]
        prompt = vl.processor.apply_chat_template(
            [{"role": "user", "content": content}], add_generation_prompt=True
        )
        enc = vl.processor(images=image, text=prompt, return_tensors="pt")
    elif vl.kind == "donut":
        # Donut's DocVQA task prompt; the answer comes back between <s_answer> tags.
        prompt = f"<s_docvqa><s_question>{question or ''}</s_question><s_answer>"
        enc = vl.processor(images=image, return_tensors="pt")
        enc["decoder_input_ids"] = vl.tokenizer(
            prompt, add_special_tokens=False, return_tensors="pt"
        ).input_ids
    elif question:
        enc = vl.processor(images=image, text=question, return_tensors="pt")
    else:  # a captioner; the processor may be an image processor alone (VisionEncoderDecoder repos)
        enc = vl.processor(images=image, return_tensors="pt")

    enc = tensors_to(enc, vl.device)
    with torch.inference_mode():
        ids = vl.model.generate(**enc, max_new_tokens=MAX_NEW_TOKENS, **stopping_criteria(out))
    out.check_stop()
    if vl.kind == "donut":
        text = vl.tokenizer.batch_decode(ids)[0]
        found = re.search(r"<s_answer>(.*?)(?:</s_answer>|$)", text, re.DOTALL)
        answer = found.group(1) if found else ""
        answer = re.sub(r"<[^>]+>", " ", answer)  # leftover special tokens
        return " ".join(answer.split()), None
    prompt_ids = enc.get("input_ids")
    if (
        prompt_ids is not None
        and ids.shape[1] > prompt_ids.shape[1]
        and torch.equal(ids[:, : prompt_ids.shape[1]], prompt_ids.to(ids.device))
    ):
        ids = ids[:, prompt_ids.shape[1] :]  # decoder-only models echo the prompt
    return " ".join(vl.tokenizer.batch_decode(ids, skip_special_tokens=True)[0].split()), None


def _caption(vl: VisionLanguage, inputs: dict[str, str], out: Outputs) -> None:
    caption, _ = ask(vl, read_image(inputs["image"]), None, out)
    out.text(caption or "(the model returned an empty caption)")


def _caption_batch(vl: VisionLanguage, inputs: list[dict[str, str]], outs: list[Outputs]) -> None:
    """Plain captioners (BLIP, GIT, ViT-GPT2: no prompt, so no padding) caption the pictures in one
    generate(); chat and Donut models, whose prompts differ in length, caption one by one."""
    import torch

    if vl.kind != "generate":
        for i, out in zip(inputs, outs, strict=True):
            _caption(vl, i, out)
        return
    enc = tensors_to(
        vl.processor(images=[read_image(i["image"]) for i in inputs], return_tensors="pt"), vl.device
    )
    with torch.inference_mode():
        ids = vl.model.generate(**enc, max_new_tokens=MAX_NEW_TOKENS, **stopping_criteria(Everyone.of(outs)))
    for caption, out in zip(vl.tokenizer.batch_decode(ids, skip_special_tokens=True), outs, strict=True):
        out.text(" ".join(caption.split()) or "(the model returned an empty caption)")


def _answer(vl: VisionLanguage, inputs: dict[str, str], out: Outputs) -> None:
    answer, candidates = ask(vl, read_image(inputs["image"]), inputs["text"], out)
    out.text(answer or "(no answer)")
    if candidates is not None:
        out.data(candidates)


def _loader(task: str):
    return lambda source, device: load(source, device, task=task)


HANDLERS = {
    "image-to-text": Handler(
        _loader("image-to-text"),
        _caption,
        batch=Batching(_caption_batch, frozenset({"image"}), MAX_BATCH),
    ),
    "visual-question-answering": Handler(_loader("visual-question-answering"), _answer),
    "document-question-answering": Handler(_loader("document-question-answering"), _answer),
}
