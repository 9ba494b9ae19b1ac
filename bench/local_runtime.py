"""Cold load vs warm call of the local runtime, per task family, on tiny random-weight models.

    python bench/local_runtime.py [--repeat 5] [--only text,audio] [--device cpu]

Each case builds its tiny model into a temporary folder (not timed), then times, on a fresh Runtime,
the first call (find files, size, load, call) and the median of the warm calls (cache hit + call).
To add a family, append a Case to CASES: (family, builder(folder), task, inputs(workdir)).
Numbers are from one run on this machine; tiny models make load overhead, not compute, dominate.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


@dataclass(frozen=True)
class Case:
    family: str
    builder: Callable[[Path], None]  # writes a model folder
    task: str
    inputs: Callable[[Path], dict[str, str]]  # workdir -> the task's inputs (files written there)


def _text(value: str) -> Callable[[Path], dict[str, str]]:
    return lambda _: {"text": value}


def _tone(work: Path) -> dict[str, str]:
    from tiny_text_audio import write_tone

    return {"audio": str(write_tone(work / "tone.wav", seconds=2.0, rate=16000))}


def _cases() -> list[Case]:
    import tiny_text_audio as t

    sentence = "the cat sat on the mat in paris"
    return [
        Case("text", t.bert_classifier, "text-classification", _text(sentence)),
        Case("text", t.bert_tagger, "token-classification", _text(sentence)),
        Case(
            "text",
            t.bert_qa,
            "question-answering",
            lambda _: {"text": "where is the cat?", "context": sentence},
        ),
        Case("text", t.bert_embedder, "sentence-similarity", lambda _: {"text": sentence, "text2": "a dog"}),
        Case("text", t.t5, "summarization", _text(sentence)),
        Case("text", t.gpt2, "text-generation", _text(sentence)),
        Case("text", t.llama_chat, "conversational", _text("hello")),
        Case(
            "tabular",
            t.sklearn_skops,
            "tabular-classification",
            _text("sepal_length,sepal_width,petal_length,petal_width\n1,1,1,1\n5,5,5,5\n"),
        ),
        Case("audio", t.wav2vec2_ctc, "automatic-speech-recognition", _tone),
        Case("audio", t.whisper, "automatic-speech-recognition", _tone),
        Case("audio", t.wav2vec2_audio_classifier, "audio-classification", _tone),
        Case("audio", t.vits, "text-to-speech", _text("hello world")),
        Case("audio", t.speecht5_tts, "text-to-speech", _text("hello world")),
        Case("audio", t.speecht5_vc, "audio-to-audio", _tone),
    ]


def _photo(extra: dict[str, str] | None = None) -> Callable[[Path], dict[str, str]]:
    def inputs(work: Path) -> dict[str, str]:
        from tiny_vision import draw_photo

        return {"image": draw_photo(work / "photo.png"), **(extra or {})}

    return inputs


def _vision_cases() -> list[Case]:
    import tiny_vision as v

    from models_local.handlers import diffusion

    diffusion.STEPS, diffusion.VIDEO_FRAMES = 2, 4  # tiny models: load cost, not denoising, is measured
    return [
        Case("vision", v.build_detr, "object-detection", _photo({"threshold": "0"})),
        Case("vision", v.build_vit_classifier, "image-classification", _photo()),
        Case("vision", v.build_segformer, "image-segmentation", _photo()),
        Case("vision", v.build_dpt, "depth-estimation", _photo()),
        Case("vision", v.build_vitpose, "openpose-control", _photo()),
        Case("multimodal", v.build_blip_captioner, "image-to-text", _photo()),
        Case("multimodal", v.build_llava, "visual-question-answering", _photo({"text": "what is it?"})),
        Case("multimodal", v.build_donut, "document-question-answering", _photo({"text": "what is it?"})),
        Case("diffusion", v.build_sd, "text-to-image", _text("a red cat")),
        Case("diffusion", v.build_sd, "image-to-image", _photo({"text": "a blue dog"})),
        Case("diffusion", v.build_text_to_video, "text-to-video", _text("a cat walking")),
        Case("diffusion", v.build_sd_controlnet, "canny-text-to-image", _photo({"text": "a house"})),
    ]


CASES: list[Callable[[], list[Case]]] = [_cases, _vision_cases]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="warm calls per case")
    parser.add_argument("--only", default="", help="comma-separated families")
    parser.add_argument("--device", default=None, help="cpu | cuda | mps (default: best available)")
    parser.add_argument("--keep", action="store_true", help="keep the built models")
    args = parser.parse_args()

    started = time.perf_counter()
    import torch  # noqa: F401  (import cost reported apart from the cases)
    import transformers  # noqa: F401

    from models_local import Runtime
    from models_local.sizing import folder_size

    imports = time.perf_counter() - started
    cases = [c for make in CASES for c in make()]
    if args.only:
        cases = [c for c in cases if c.family in args.only.split(",")]
    work = Path(tempfile.mkdtemp(prefix="bench-local-runtime-"))
    print(f"imports (torch, transformers): {imports:.2f} s; device {Runtime(device=args.device).device.name}")
    header = (
        f"{'family':8} {'task':30} {'model':26} {'size KB':>8} {'cold ms':>9} {'warm ms':>9} {'cold/warm':>9}"
    )
    print(header)
    print("-" * len(header))
    for i, case in enumerate(cases):
        folder = work / f"{i}-{case.builder.__name__}"
        folder.mkdir()
        case.builder(folder)
        inputs = case.inputs(work)
        runtime = Runtime(device=args.device)
        t0 = time.perf_counter()
        runtime.run(case.task, str(folder), inputs, work / "out")
        cold = time.perf_counter() - t0
        warm = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            runtime.run(case.task, str(folder), inputs, work / "out")
            warm.append(time.perf_counter() - t0)
        w = statistics.median(warm)
        size = (folder_size(folder, half=runtime.half) or 0) / 1024
        print(
            f"{case.family:8} {case.task:30} {case.builder.__name__:26} {size:8.0f} {cold * 1e3:9.1f} "
            f"{w * 1e3:9.1f} {cold / w:9.1f}"
        )
    print(f"total {time.perf_counter() - started:.1f} s")
    if args.keep:
        print(f"models kept under {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
