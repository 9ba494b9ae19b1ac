"""TaskBench's tool names <-> the project's task types, in one place.

TaskBench (Hugging Face domain) names its 23 tools in Title Case ("Image Classification"); the
project uses Hub-style task types (`image-classification`, see hugginggpt/tasks.py). Two TaskBench
tools, "Image-to-Image" and "Image Editing", are both the project's `image-to-image`; going back, a
task that carries a text prompt is "Image Editing" (TaskBench gives that tool a text and an image
input) and one without is "Image-to-Image".
"""

from __future__ import annotations

from collections.abc import Mapping

TASKBENCH_TO_PROJECT: dict[str, str] = {
    "Token Classification": "token-classification",
    "Translation": "translation",
    "Summarization": "summarization",
    "Question Answering": "question-answering",
    "Conversational": "conversational",
    "Text Generation": "text-generation",
    "Sentence Similarity": "sentence-similarity",
    "Tabular Classification": "tabular-classification",
    "Object Detection": "object-detection",
    "Image Classification": "image-classification",
    "Image-to-Image": "image-to-image",
    "Image-to-Text": "image-to-text",
    "Text-to-Image": "text-to-image",
    "Text-to-Video": "text-to-video",
    "Visual Question Answering": "visual-question-answering",
    "Document Question Answering": "document-question-answering",
    "Image Segmentation": "image-segmentation",
    "Depth Estimation": "depth-estimation",
    "Text-to-Speech": "text-to-speech",
    "Automatic Speech Recognition": "automatic-speech-recognition",
    "Audio-to-Audio": "audio-to-audio",
    "Audio Classification": "audio-classification",
    "Image Editing": "image-to-image",
}

# The reverse, where it is one-to-one. image-to-image is settled by its arguments (see below).
_PROJECT_TO_TASKBENCH: dict[str, str] = {
    project: name for name, project in TASKBENCH_TO_PROJECT.items() if project != "image-to-image"
}


def to_project(tool: str) -> str | None:
    """The project's task type for a TaskBench tool name ("Image_Editing" spelling accepted)."""
    return TASKBENCH_TO_PROJECT.get(tool.replace("_", " ").strip())


def to_taskbench(task: str, args: Mapping[str, str] | None = None) -> str | None:
    """The TaskBench tool name for a project task type; None when TaskBench has no such tool."""
    if task == "image-to-image":
        prompt = (args or {}).get("text", "")
        return "Image Editing" if prompt.strip() else "Image-to-Image"
    return _PROJECT_TO_TASKBENCH.get(task)
