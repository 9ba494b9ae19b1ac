"""Writing generated frames as an MP4 that browsers play (H.264, yuv420p, moov atom first).

Uses imageio-ffmpeg, whose wheel ships an ffmpeg binary (no system ffmpeg needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def available() -> bool:
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        return False
    return True


def write_mp4(frames: Any, path: str | Path, *, fps: int = 8) -> Path:
    """frames: (count, height, width, 3) uint8, or floats in [0, 1]."""
    import imageio_ffmpeg
    import numpy as np

    frames = np.asarray(frames)
    if frames.dtype != np.uint8:
        frames = (frames.clip(0, 1) * 255).round().astype(np.uint8)
    if frames.ndim != 4 or frames.shape[-1] != 3 or len(frames) == 0:
        raise ValueError(f"expected (frames, height, width, 3) pixels, got shape {frames.shape}")
    # yuv420p halves the chroma resolution: H.264 needs even sides, so pad by edge repetition.
    _, h, w, _ = frames.shape
    frames = np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)), mode="edge")
    height, width = frames.shape[1:3]
    writer = imageio_ffmpeg.write_frames(
        str(path),
        (width, height),
        fps=fps,
        codec="libx264",
        pix_fmt_out="yuv420p",
        macro_block_size=1,
        output_params=["-movflags", "+faststart"],
    )
    writer.send(None)  # start ffmpeg
    for frame in frames:
        writer.send(np.ascontiguousarray(frame))
    writer.close()
    return Path(path)


def read_mp4(path: str | Path) -> tuple[Any, tuple[int, int]]:
    """(frames as a (count, height, width, 3) uint8 array, (width, height)): for checks and tests."""
    import imageio_ffmpeg
    import numpy as np

    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    width, height = meta["size"]
    frames = [np.frombuffer(f, dtype=np.uint8).reshape(height, width, 3) for f in reader]
    return np.stack(frames), (width, height)
