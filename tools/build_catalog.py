"""Build the shipped model catalog (hugginggpt/catalog/models.jsonl). A dev tool, run by hand.

    python tools/build_catalog.py [--p0 ../shared/catalog/p0_models.jsonl] [--out PATH]

Facts carried over from the reference list (ids, tasks, download/like counts, license, languages,
datasets, tags) plus curated entries for what it lacks (the ControlNet family, a few well-known
local models for tasks it covers poorly). Descriptions are built from the facts, never from card
prose. The project reads only the output file at run time, never ../shared.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hugginggpt.catalog.card import ModelCard
from hugginggpt.catalog.describe import describe
from hugginggpt.catalog.indexed_file import write_indexed
from hugginggpt.catalog.rules import is_local
from hugginggpt.tasks import TASKS

P0 = ROOT.parent / "shared" / "catalog" / "p0_models.jsonl"
OUT = ROOT / "hugginggpt" / "catalog" / "models.jsonl"

# Libraries named by a tag or by the owner of the id.
# fmt: off
TAG_LIBRARIES = {
    "diffusers": "diffusers", "stable-diffusion-diffusers": "diffusers", "espnet": "espnet",
    "speechbrain": "speechbrain", "asteroid": "asteroid", "fairseq": "fairseq", "nemo": "nemo",
    "flair": "flair", "spacy": "spacy", "keras": "keras", "sklearn": "sklearn", "skops": "sklearn",
    "timm": "timm", "ultralytics": "ultralytics", "yolov5": "yolov5", "paddlenlp": "paddlenlp",
    "mlconsole": "mlconsole", "fastai": "fastai", "tensorflowtts": "tensorflowtts",
    "sentence-transformers": "sentence-transformers", "rwkv": "rwkv", "autotrain": "autotrain",
    "tune-a-video": "tune-a-video",
}
# fmt: on
# fmt: off
OWNER_LIBRARIES = {
    "speechbrain": "speechbrain", "espnet": "espnet", "pyannote": "pyannote-audio", "flair": "flair",
    "spacy": "spacy", "keras-io": "keras", "sentence-transformers": "sentence-transformers",
    "timm": "timm", "ultralyticsplus": "ultralytics", "templates": "generic",
}
# fmt: on
# Known exceptions to the rules, checked by hand (weights not in a library's format).
LIBRARY_OVERRIDES = {
    "damo-vilab/text-to-video-ms-1.7b": "diffusers",
    "damo-vilab/text-to-video-ms-1.7b-legacy": "diffusers",
    "damo-vilab/modelscope-damo-text-to-video-synthesis": "modelscope",
    "cloudqi/CQI_Visual_Question_Awnser_PT_v0": "adapter-transformers",
    "davanstrien/testwebhook": None,
    "caidas/swin2SR-classical-sr-x2-64": "transformers",  # Swin2SR super-resolution
    "sparanoid/milky-green-sovits": "so-vits-svc",
    "hivemind/gpt-j-6B-8bit": None,  # custom 8-bit layers, not loadable as a plain checkpoint
}
# Repositories that moved after the reference snapshot: same weights, new id (the old one is gone).
RENAMED = {
    "runwayml/stable-diffusion-v1-5": "stable-diffusion-v1-5/stable-diffusion-v1-5",
    "runwayml/stable-diffusion-inpainting": "stable-diffusion-v1-5/stable-diffusion-inpainting",
}
# Approximate sizes: the parameter count an id states ("-6.7b", "_418M"), or a well-known count,
# at 2 bytes a parameter (half precision): enough for the runtime to refuse a model far over its
# memory budget before downloading it. Unknown otherwise (None).
PARAMS_IN_NAME = re.compile(r"(?:^|[-_/.])(\d+(?:\.\d+)?)([bBmM])(?=$|[-_.])")
# fmt: off
KNOWN_PARAMS = {
    "bigscience/bloom": 176e9, "bigscience/bloomz": 176e9, "google/flan-ul2": 20e9, "google/ul2": 20e9,
    "bigscience/T0pp": 11e9, "bigscience/T0": 11e9, "google/flan-t5-xxl": 11e9, "google/flan-t5-xl": 3e9,
    "google/flan-t5-large": 780e6, "google/flan-t5-base": 250e6, "google/flan-t5-small": 80e6,
    "openai/whisper-large": 1.55e9, "openai/whisper-large-v2": 1.55e9, "openai/whisper-medium": 769e6,
    "openai/whisper-small": 244e6, "openai/whisper-base": 74e6, "openai/whisper-tiny": 39e6,
    "gpt2": 124e6, "gpt2-xl": 1.5e9, "distilgpt2": 82e6,
    "t5-small": 60e6, "t5-base": 220e6, "t5-large": 770e6,
}
# fmt: on


def approx_size(model_id: str) -> int | None:
    params = KNOWN_PARAMS.get(model_id)
    if params is None:
        m = PARAMS_IN_NAME.search(model_id.split("/")[-1])
        if m is None:
            return None
        params = float(m.group(1)) * (1e9 if m.group(2) in "bB" else 1e6)
    return int(params * 2)


# Tasks whose models are diffusion pipelines unless a tag says otherwise.
DIFFUSION_TASKS = {"text-to-image", "image-to-image", "text-to-video"}
GENERIC_TAGS = {"pytorch", "tensorflow", "jax", "safetensors", "transformers", "en", "exbert"}


def as_tuple(value) -> tuple[str, ...]:
    if value is None:
        return ()
    values = value if isinstance(value, list) else [value]
    return tuple(dict.fromkeys(str(v) for v in values if isinstance(v, (str, int)) and str(v).strip()))


def infer_library(row: dict) -> str | None:
    """The library a model's files are written for, from the card header, tags and owner."""
    meta = row.get("meta") or {}
    model_id = row["id"]
    if model_id in LIBRARY_OVERRIDES:
        return LIBRARY_OVERRIDES[model_id]
    if isinstance(meta.get("library_name"), str):
        name = meta["library_name"].lower()
        return {"scikit-learn": "sklearn", "stable-diffusion": "stable-diffusion"}.get(name, name)
    tags = [t.lower() for t in as_tuple(meta.get("tags"))]
    for tag in tags:
        if tag in TAG_LIBRARIES:
            return TAG_LIBRARIES[tag]
    owner = model_id.split("/")[0].lower() if "/" in model_id else ""
    if owner in OWNER_LIBRARIES:
        return OWNER_LIBRARIES[owner]
    if row["task"] == "tabular-classification":
        return None  # tabular models on the Hub are sklearn/keras/autotrain artefacts
    # Hub download counts come from fetching config files; no count means no library config.
    if not row.get("downloads"):
        return None
    if row["task"] in DIFFUSION_TASKS:
        return "diffusers" if "stable-diffusion" in tags else None
    return "transformers"


def p0_cards(path: Path) -> list[ModelCard]:
    cards = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["task"] not in TASKS:
                continue
            meta = row.get("meta") or {}
            library = infer_library(row)
            languages = as_tuple(meta.get("language") or meta.get("languages"))
            datasets = as_tuple(meta.get("datasets"))
            license_ = as_tuple(meta.get("license"))
            tags = tuple(
                t
                for t in as_tuple(meta.get("tags"))
                if t.lower() not in GENERIC_TAGS and t != row["task"] and t not in languages
            )[:12]
            if row["id"] in RENAMED:
                tags = (*tags, f"moved-from:{row['id']}")
            model_id = RENAMED.get(row["id"], row["id"])
            cards.append(
                ModelCard(
                    id=model_id,
                    task=row["task"],
                    downloads=int(row.get("downloads") or 0),
                    likes=int(row.get("likes") or 0),
                    library=library,
                    license=license_[0] if license_ else None,
                    size_bytes=approx_size(model_id),
                    languages=languages,
                    datasets=datasets,
                    tags=tags,
                    description=describe(
                        model_id=model_id,
                        task=row["task"],
                        library=library,
                        languages=languages,
                        datasets=datasets,
                        tags=tags,
                    ),
                )
            )
    return cards


# Curated entries for tasks the reference list lacks (ControlNet) or covers with few models the
# local runtime can load. Only facts we are sure of; counts unknown (counts_known=False, 0).
SD15 = "base_model:stable-diffusion-v1-5/stable-diffusion-v1-5"
SD21 = "base_model:stabilityai/stable-diffusion-2-1"
SDXL = "base_model:stabilityai/stable-diffusion-xl-base-1.0"
CONTROLNETS = {  # control -> [(id, license, base model tag)]
    "canny": [
        ("lllyasviel/sd-controlnet-canny", "openrail", SD15),
        ("lllyasviel/control_v11p_sd15_canny", "openrail", SD15),
        ("fusing/stable-diffusion-v1-5-controlnet-canny", None, SD15),
        ("thibaud/controlnet-sd21-canny-diffusers", None, SD21),
        ("diffusers/controlnet-canny-sdxl-1.0", "openrail++", SDXL),
        ("xinsir/controlnet-canny-sdxl-1.0", "apache-2.0", SDXL),
    ],
    "depth": [
        ("lllyasviel/sd-controlnet-depth", "openrail", SD15),
        ("lllyasviel/control_v11f1p_sd15_depth", "openrail", SD15),
        ("fusing/stable-diffusion-v1-5-controlnet-depth", None, SD15),
        ("thibaud/controlnet-sd21-depth-diffusers", None, SD21),
        ("diffusers/controlnet-depth-sdxl-1.0", "openrail++", SDXL),
    ],
    "hed": [
        ("lllyasviel/sd-controlnet-hed", "openrail", SD15),
        ("lllyasviel/control_v11p_sd15_softedge", "openrail", SD15),
        ("fusing/stable-diffusion-v1-5-controlnet-hed", None, SD15),
        ("thibaud/controlnet-sd21-hed-diffusers", None, SD21),
    ],
    "mlsd": [
        ("lllyasviel/sd-controlnet-mlsd", "openrail", SD15),
        ("lllyasviel/control_v11p_sd15_mlsd", "openrail", SD15),
    ],
    "normal": [
        ("lllyasviel/sd-controlnet-normal", "openrail", SD15),
        ("lllyasviel/control_v11p_sd15_normalbae", "openrail", SD15),
        ("fusing/stable-diffusion-v1-5-controlnet-normal", None, SD15),
        ("thibaud/controlnet-sd21-normalbae-diffusers", None, SD21),
    ],
    "openpose": [
        ("lllyasviel/sd-controlnet-openpose", "openrail", SD15),
        ("lllyasviel/control_v11p_sd15_openpose", "openrail", SD15),
        ("fusing/stable-diffusion-v1-5-controlnet-openpose", None, SD15),
        ("thibaud/controlnet-sd21-openpose-diffusers", None, SD21),
        ("thibaud/controlnet-openpose-sdxl-1.0", None, SDXL),
        ("xinsir/controlnet-openpose-sdxl-1.0", "apache-2.0", SDXL),
    ],
    "seg": [
        ("lllyasviel/sd-controlnet-seg", "openrail", SD15),
        ("lllyasviel/control_v11p_sd15_seg", "openrail", SD15),
        ("thibaud/controlnet-sd21-ade20k-diffusers", None, SD21),
    ],
}
ANNOTATORS = "lllyasviel/Annotators"  # controlnet_aux detectors (HED, MLSD, OpenPose, NormalBae)
ANNOTATORS_V1 = "lllyasviel/ControlNet"  # the original release's annotator weights
# control -> [(id, library, license, note)] for making control images from photos.
CONTROL_ANNOTATORS = {
    "canny": [
        (
            "canny-edge-detector",
            "builtin",
            None,
            "the Canny edge detector, no weights (the local runtime's own)",
        ),
        (ANNOTATORS, "controlnet_aux", "apache-2.0", "Canny edges, no weights needed"),
    ],
    "depth": [
        (
            "Intel/dpt-hybrid-midas",
            "transformers",
            "apache-2.0",
            "MiDaS depth, as the depth ControlNet was trained on",
        ),
        ("Intel/dpt-large", "transformers", "apache-2.0", "MiDaS depth"),
        ("LiheYoung/depth-anything-small-hf", "transformers", "apache-2.0", "Depth Anything"),
        (ANNOTATORS, "controlnet_aux", "apache-2.0", "MiDaS and Zoe depth detectors"),
    ],
    "hed": [
        (ANNOTATORS, "controlnet_aux", "apache-2.0", "HED soft edges"),
        (ANNOTATORS_V1, "controlnet_aux", "openrail", "HED soft edges, original weights"),
    ],
    "mlsd": [
        (ANNOTATORS, "controlnet_aux", "apache-2.0", "M-LSD straight lines"),
        (ANNOTATORS_V1, "controlnet_aux", "openrail", "M-LSD straight lines, original weights"),
    ],
    "normal": [
        ("Intel/dpt-hybrid-midas", "transformers", "apache-2.0", "normals derived from MiDaS depth"),
        ("Intel/dpt-large", "transformers", "apache-2.0", "normals derived from MiDaS depth"),
        (ANNOTATORS, "controlnet_aux", "apache-2.0", "NormalBae surface normals"),
    ],
    "openpose": [
        (ANNOTATORS, "controlnet_aux", "apache-2.0", "OpenPose body keypoints"),
        (ANNOTATORS_V1, "controlnet_aux", "openrail", "OpenPose body keypoints, original weights"),
        ("usyd-community/vitpose-base-simple", "transformers", "apache-2.0", "ViTPose body keypoints"),
    ],
    "seg": [
        (
            "openmmlab/upernet-convnext-small",
            "transformers",
            "mit",
            "UperNet on ADE20K, the seg ControlNet's palette",
        ),
        ("openmmlab/upernet-convnext-base", "transformers", "mit", "UperNet on ADE20K"),
        ("nvidia/segformer-b0-finetuned-ade-512-512", "transformers", "other", "SegFormer on ADE20K"),
        ("nvidia/segformer-b5-finetuned-ade-640-640", "transformers", "other", "SegFormer on ADE20K"),
        ("facebook/maskformer-swin-large-ade", "transformers", "other", "MaskFormer on ADE20K"),
        ("shi-labs/oneformer_ade20k_swin_tiny", "transformers", "mit", "OneFormer on ADE20K"),
    ],
}
# task -> [(id, library, license)]: well-known models the local runtime loads, for thin tasks.
EXTRA = {
    "image-to-image": [
        ("timbrooks/instruct-pix2pix", "diffusers", "mit"),
        ("stable-diffusion-v1-5/stable-diffusion-v1-5", "diffusers", "creativeml-openrail-m"),
        ("stabilityai/stable-diffusion-2-1", "diffusers", "openrail++"),
    ],
    "text-to-speech": [
        ("facebook/mms-tts-eng", "transformers", "cc-by-nc-4.0"),
        ("suno/bark-small", "transformers", "mit"),
    ],
    "depth-estimation": [
        ("LiheYoung/depth-anything-small-hf", "transformers", "apache-2.0"),
        ("depth-anything/Depth-Anything-V2-Small-hf", "transformers", "apache-2.0"),
    ],
}


def curated_cards(known: dict[tuple[str, str], ModelCard]) -> list[ModelCard]:
    """Curated entries; counts are reused only where the reference list has the same model."""

    def counts(model_id: str) -> dict:
        same = [c for (_, i), c in known.items() if i == model_id]
        if same:
            return {"downloads": same[0].downloads, "likes": same[0].likes, "counts_known": True}
        return {"downloads": 0, "likes": 0, "counts_known": False}

    cards = []
    for control, models in CONTROLNETS.items():
        task = f"{control}-text-to-image"
        for model_id, license_, base in models:
            cards.append(
                ModelCard(
                    id=model_id,
                    task=task,
                    library="diffusers",
                    license=license_,
                    languages=("en",),
                    tags=("controlnet", control, base),
                    **counts(model_id),
                    description=describe(
                        model_id=model_id,
                        task=task,
                        library="diffusers",
                        tags=("controlnet",),
                        note=f"a ControlNet for {base.split(':', 1)[1]}",
                    ),
                )
            )
    for control, models in CONTROL_ANNOTATORS.items():
        task = f"{control}-control"
        for model_id, library, license_, note in models:
            cards.append(
                ModelCard(
                    id=model_id,
                    task=task,
                    library=library,
                    license=license_,
                    tags=("controlnet-annotator", control),
                    **counts(model_id),
                    description=describe(model_id=model_id, task=task, library=library, note=note),
                )
            )
    for task, models in EXTRA.items():
        for model_id, library, license_ in models:
            cards.append(
                ModelCard(
                    id=model_id,
                    task=task,
                    library=library,
                    license=license_,
                    **counts(model_id),
                    description=describe(model_id=model_id, task=task, library=library),
                )
            )
    return cards


def runtime_rule():
    """`local` for a card: its library must be one the runtime loads, and when models_local is
    importable its own cheap can_run must accept it (tasks without a handler are not local)."""
    try:
        import models_local

        supported = frozenset(models_local.SUPPORTED_TASKS)
    except (ImportError, AttributeError):
        return lambda card: is_local(card.task, card.library), "the catalog's rule (no models_local)"

    def local(card: ModelCard) -> bool:
        if not is_local(card.task, card.library):
            return False
        # can_run says no to a task outside SUPPORTED_TASKS (it has no handler for it)
        return bool(models_local.can_run(card.task, card.id, library=card.library, size_bytes=0))

    return local, f"models_local.can_run ({len(supported)} tasks have a handler)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--p0", type=Path, default=P0)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    from dataclasses import replace

    base = p0_cards(args.p0)
    known = {(c.task, c.id): c for c in base}
    cards = base + [c for c in curated_cards(known) if (c.task, c.id) not in known]
    local, how = runtime_rule()
    # A ControlNet for another base (SD 2.1, SDXL) is not local: the runtime pairs them with SD 1.5.
    cards = [
        replace(
            c,
            local=local(c)
            and not (c.task.endswith("-text-to-image") and SD15 not in c.tags and "controlnet" in c.tags),
        )
        for c in cards
    ]
    count = write_indexed(cards, args.out)
    per_task = Counter(c.task for c in cards)
    local_per_task = Counter(c.task for c in cards if c.local)
    print(f"wrote {count} models to {args.out} (local flag from {how})")
    for task in TASKS:
        print(f"  {task:32} {per_task[task]:3} models, {local_per_task[task]:3} local")
    missing = [t for t in TASKS if not local_per_task[t]]
    if missing:
        print("tasks without a local candidate: " + ", ".join(missing))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
