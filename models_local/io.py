"""Reading media files for the models: images through Pillow, audio through soundfile.

No torchaudio and no ffmpeg: soundfile reads wav, flac and ogg (libsndfile), and scipy resamples.
"""

from __future__ import annotations

from math import gcd
from pathlib import Path
from typing import Any


def read_image(path: str | Path, mode: str = "RGB") -> Any:
    """A PIL image in `mode` (palette, alpha and greyscale images are converted)."""
    from PIL import Image, ImageOps

    with Image.open(path) as opened:
        image = ImageOps.exif_transpose(opened)  # phone photos carry their rotation in EXIF
        if image.mode != mode:
            # Composite transparent images on white: converting RGBA straight to RGB turns the
            # transparent background black, which models read as content.
            if "A" in image.getbands() or image.mode == "P" and "transparency" in image.info:
                rgba = image.convert("RGBA")
                background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
                image = Image.alpha_composite(background, rgba)
            image = image.convert(mode)
        else:
            image = image.copy()  # detach from the file before it closes
    return image


def read_audio(path: str | Path, sampling_rate: int) -> Any:
    """Mono float32 samples in [-1, 1] at `sampling_rate` Hz."""
    import soundfile as sf

    data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    samples = data.mean(axis=1)  # mix channels down to mono
    return resample(samples, rate, sampling_rate)  # float32


def resample(samples: Any, rate: int, target: int) -> Any:
    """Polyphase resampling (anti-aliased) from `rate` to `target` Hz."""
    import numpy as np

    samples = np.asarray(samples, dtype=np.float32)
    if rate == target or samples.size == 0:
        return samples
    from scipy.signal import resample_poly

    g = gcd(int(rate), int(target))
    return resample_poly(samples, int(target) // g, int(rate) // g).astype(np.float32)
