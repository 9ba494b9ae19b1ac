"""Checks on what a person uploads: kind by suffix, size, and that the file really decodes.

A problem is returned as a sentence for the chat, never raised: a bad upload must not stop the app.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from hugginggpt.files.artifacts import kind_of_file
from hugginggpt.plain_errors import in_words

ACCEPTED = ("image", "audio")
MAX_PIXELS = 40_000_000  # larger images are refused before they are decoded


def check_upload(path: str | Path, *, max_bytes: int, shown_name: str | None = None) -> str | None:
    """None when the file is a usable image or audio clip, else what is wrong with it."""
    path = Path(path)
    name = shown_name or path.name
    kind = kind_of_file(path)
    if kind not in ACCEPTED:
        kind = path.suffix or "no suffix"
        return f"'{name}' was not used: only images and audio files are accepted (got '{kind}')."
    try:
        size = path.stat().st_size
    except OSError:
        return f"'{name}' was not used: the upload could not be read."
    if size == 0:
        return f"'{name}' was not used: the file is empty."
    if size > max_bytes:
        return f"'{name}' was not used: it is {_mb(size)}, over the {_mb(max_bytes)} limit."
    problem = _image_problem(path) if kind == "image" else _audio_problem(path)
    return f"'{name}' was not used: {problem}." if problem else None


def _image_problem(path: Path) -> str | None:
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                if image.width * image.height > MAX_PIXELS:
                    return f"the image is {image.width}x{image.height} pixels, too large to process"
                image.load()  # decodes every pixel: truncated or corrupt data fails here
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        return "the image is too large to process"
    except Exception as exc:  # noqa: BLE001 (Pillow raises many types for bad data)
        return f"it is not a readable image ({in_words(exc)})"
    return None


def _audio_problem(path: Path) -> str | None:
    import soundfile

    try:
        with soundfile.SoundFile(str(path)) as clip:  # opened once: header, then a second of samples
            if clip.frames <= 0:
                return "the audio clip holds no samples"
            clip.read(frames=min(clip.frames, 48_000))
    except Exception as exc:  # noqa: BLE001 (libsndfile errors vary by format)
        return f"it is not a readable audio file ({in_words(exc)})"
    return None


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 1_000_000 else f"{n / 1000:.0f} kB"
