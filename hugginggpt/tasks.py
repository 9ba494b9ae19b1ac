"""The task types a plan may use: their arguments and what they produce.

This table is the single source of truth for task names. The planner prompt lists it, the
validator checks plans against it, and the local runtime (models_local) serves the same names.
"""

from __future__ import annotations

from dataclasses import dataclass

# Values that flow along the DAG are text, media files, or "data": structured output (boxes, labels,
# scores): the kinds of hugginggpt.files.artifacts.ArtifactKind.


@dataclass(frozen=True)
class Arg:
    name: str
    kind: str  # text | image | audio | video
    required: bool = True
    help: str = ""


@dataclass(frozen=True)
class TaskSpec:
    name: str
    args: tuple[Arg, ...]
    outputs: tuple[str, ...]  # kinds this task produces, the first one is its main output
    description: str
    samples: bool = False  # its models draw noise: the run gives them a seed (seeds.py)
    seconds: float | None = None  # a slow task's call on CPU, before any run here (estimate.py)
    gpu_seconds: int = 10  # to run once loaded on a Space's GPU (webui.host.gpu asks ZeroGPU for it)
    control: str | None = None  # ControlNet's tasks: the control image's kind ("canny", "depth", ...)

    def arg(self, name: str) -> Arg | None:
        return next((a for a in self.args if a.name == name), None)


TEXT = Arg("text", "text")
IMAGE = Arg("image", "image")
AUDIO = Arg("audio", "audio")
PROMPT = Arg("text", "text", required=False, help="optional prompt")


_BASE = [
    TaskSpec("text-classification", (TEXT,), ("text", "data"), "label a text (sentiment, topic, ...)"),
    TaskSpec("token-classification", (TEXT,), ("text", "data"), "tag words or entities in a text"),
    TaskSpec("text2text-generation", (TEXT,), ("text",), "rewrite a text into another text"),
    TaskSpec("summarization", (TEXT,), ("text",), "summarise a long text"),
    TaskSpec("translation", (TEXT,), ("text",), "translate a text into another language"),
    TaskSpec(
        "question-answering",
        (
            Arg("text", "text", help="the question"),
            Arg("context", "text", help="the text holding the answer"),
        ),
        ("text", "data"),
        "answer a question from a given context text",
    ),
    TaskSpec("conversational", (TEXT,), ("text",), "reply in a dialogue", samples=True, gpu_seconds=30),
    # text-generation samples when the model's generation config says so
    TaskSpec(
        "text-generation",
        (TEXT,),
        ("text",),
        "continue or write a text from a prompt",
        samples=True,
        gpu_seconds=30,
    ),
    TaskSpec(
        "sentence-similarity",
        (
            Arg("text", "text", help="the source sentence"),
            Arg("text2", "text", help="the sentence to compare"),
        ),
        ("text", "data"),
        "score how similar two sentences are",
    ),
    TaskSpec(
        "tabular-classification",
        (Arg("text", "text", help="CSV rows with a header line"),),
        ("text", "data"),
        "classify the rows of a table",
    ),
    TaskSpec("object-detection", (IMAGE,), ("image", "text", "data"), "find and box the objects in an image"),
    TaskSpec("image-classification", (IMAGE,), ("text", "data"), "say what an image shows, as labels"),
    TaskSpec("image-to-text", (IMAGE,), ("text",), "caption an image", gpu_seconds=20),
    TaskSpec(
        "text-to-image",
        (TEXT,),
        ("image",),
        "draw an image from a description",
        samples=True,
        seconds=30.0,
        gpu_seconds=40,
    ),
    TaskSpec(
        "image-to-image",
        (IMAGE, PROMPT),
        ("image",),
        "transform or edit an image, guided by a prompt",
        samples=True,
        seconds=30.0,
        gpu_seconds=40,
    ),
    TaskSpec(
        "image-segmentation", (IMAGE,), ("image", "text", "data"), "split an image into labelled regions"
    ),
    TaskSpec("depth-estimation", (IMAGE,), ("image",), "estimate the depth of each pixel of an image"),
    # VITS draws noise; SpeechT5 keeps dropout on at inference
    TaskSpec(
        "text-to-speech", (TEXT,), ("audio",), "read a text aloud", samples=True, seconds=5.0, gpu_seconds=20
    ),
    TaskSpec(
        "automatic-speech-recognition",
        (AUDIO,),
        ("text",),
        "transcribe speech in an audio file",
        gpu_seconds=30,
    ),
    TaskSpec("audio-to-audio", (AUDIO,), ("audio",), "enhance or separate audio", gpu_seconds=30),
    TaskSpec("audio-classification", (AUDIO,), ("text", "data"), "label the sound in an audio file"),
    TaskSpec(
        "visual-question-answering",
        (IMAGE, Arg("text", "text", help="the question")),
        ("text",),
        "answer a question about an image",
        gpu_seconds=20,
    ),
    TaskSpec(
        "document-question-answering",
        (IMAGE, Arg("text", "text", help="the question")),
        ("text",),
        "answer a question about a document image",
        gpu_seconds=20,
    ),
    TaskSpec(
        "text-to-video",
        (TEXT,),
        ("video",),
        "make a short video from a description",
        samples=True,
        seconds=120.0,
        gpu_seconds=110,
    ),
]

# ControlNet: "<c>-control" turns a photo into a control image (edges, depth, pose, ...);
# "<c>-text-to-image" draws a new image from such a control image and a prompt.
CONTROLS = ("canny", "depth", "hed", "mlsd", "normal", "openpose", "seg")
_CONTROLNET = [
    spec
    for c in CONTROLS
    for spec in (
        TaskSpec(f"{c}-control", (IMAGE,), ("image",), f"make a {c} control image from a photo", control=c),
        TaskSpec(
            f"{c}-text-to-image",
            (Arg("image", "image", help=f"a {c} control image"), TEXT),
            ("image",),
            f"draw an image that follows a {c} control image and a prompt",
            samples=True,
            gpu_seconds=45,  # a ControlNet and a base model
            control=c,
        ),
    )
]

TASKS: dict[str, TaskSpec] = {spec.name: spec for spec in _BASE + _CONTROLNET}


def get(name: str) -> TaskSpec | None:
    return TASKS.get(name)


# Names LLMs often use instead of ours; used to suggest the right one, never applied silently.
ALIASES = {
    "image-captioning": "image-to-text",
    "captioning": "image-to-text",
    "speech-recognition": "automatic-speech-recognition",
    "speech-to-text": "automatic-speech-recognition",
    "asr": "automatic-speech-recognition",
    "tts": "text-to-speech",
    "speech-synthesis": "text-to-speech",
    "sentiment-analysis": "text-classification",
    "ner": "token-classification",
    "named-entity-recognition": "token-classification",
    "image-generation": "text-to-image",
    "image-editing": "image-to-image",
    "chat": "conversational",
    "vqa": "visual-question-answering",
    "depth": "depth-estimation",
    "segmentation": "image-segmentation",
    "detection": "object-detection",
}

BUILT_IN = frozenset(TASKS)


def register(spec: TaskSpec) -> None:
    """Add a task type that is a tool of the catalog (catalog/tools.py), so the planning prompt, the
    plan's validation and the executor see it like any other; a built-in type is never replaced."""
    if spec.name in BUILT_IN:
        raise ValueError(f"{spec.name!r} is a built-in task type")
    TASKS[spec.name] = spec
