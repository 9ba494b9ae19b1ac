"""Short descriptions built from a model's facts, in the project's own words.

Used for the shipped catalog (no card prose is carried over) and by refresh when a card has no text.
"""

from __future__ import annotations

import re

from hugginggpt.tasks import TASKS

# Model families worth naming, matched against the id and tags (first match wins).
# fmt: off
FAMILIES = (
    "controlnet", "stable-diffusion-xl", "stable-diffusion", "instruct-pix2pix", "text-to-video-ms",
    "whisper", "wav2vec2", "hubert", "speecht5", "vits", "bark", "musicgen", "ast", "clap",
    "layoutlmv3", "layoutlmv2", "layoutlm", "donut", "pix2struct", "blip2", "blip", "git", "vilt",
    "trocr", "vit-gpt2", "owlvit", "yolos", "detr", "segformer", "maskformer", "mask2former",
    "oneformer", "clipseg", "upernet", "dpt", "glpn", "swin2sr", "beit", "deit", "convnext", "swin",
    "resnet", "mobilevit", "vit", "clip", "flan-t5", "mt5", "t5", "mbart", "bart", "pegasus", "led",
    "marian", "opus-mt", "nllb", "m2m100", "blenderbot", "dialogpt", "godel", "gpt-neox", "gpt-neo",
    "gpt-j", "gpt2", "bloom", "opt", "llama", "pythia", "deberta", "xlm-roberta", "roberta",
    "distilbert", "electra", "minilm", "mpnet", "bert",
)
# fmt: on

NAMES = {
    "controlnet": "ControlNet",
    "stable-diffusion": "Stable Diffusion",
    "stable-diffusion-xl": "SDXL",
    "whisper": "Whisper",
    "flan-t5": "FLAN-T5",
    "opus-mt": "OPUS-MT",
    "wav2vec2": "wav2vec 2.0",
}


def family(model_id: str, tags: tuple[str, ...] = ()) -> str | None:
    """The model family named in the id (at a word boundary) or in the tags."""
    name = model_id.lower().split("/")[-1]
    lowered = {t.lower() for t in tags}
    for fam in FAMILIES:
        if fam in lowered or re.search(rf"(^|[-_.]){re.escape(fam)}($|[-_.\d])", name):
            return fam
    return None


def describe(
    *,
    model_id: str,
    task: str,
    library: str | None = None,
    languages: tuple[str, ...] = (),
    datasets: tuple[str, ...] = (),
    tags: tuple[str, ...] = (),
    note: str | None = None,
) -> str:
    """E.g. "A BART model (transformers) to summarise a long text; trained on cnn_dailymail."."""
    spec = TASKS.get(task)
    purpose = spec.description if spec else task.replace("-", " ")
    fam = family(model_id, tags)
    if fam:
        name = NAMES.get(fam, fam.upper() if len(fam) <= 4 else fam)
        what = f"{'An' if name[0].lower() in 'aeiou' else 'A'} {name} model"
    else:
        what = "A model"
    if library:
        what += f" ({library})"
    text = f"{what} to {purpose}"
    if languages and len(languages) <= 3:
        text += " in " + ", ".join(languages)
    elif len(languages) > 3:
        text += f" in {len(languages)} languages"
    if datasets:
        text += "; trained on " + ", ".join(datasets[:3]) + (" and more" if len(datasets) > 3 else "")
    if note:
        text += f"; {note}"
    return text + "."
