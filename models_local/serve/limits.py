"""What one request may cost the expert server, checked before anything is decoded or loaded.

An image's size is read from its header (Pillow opens lazily), an audio clip's length from its
header (libsndfile): a 12000x12000 PNG is 419 kB on the wire and 2.5 GB decoded, so the cap is
checked before a single pixel is. Connections are bounded by uvicorn's own settings (see
`uvicorn_options`), and each client's share of them by serve.fair; uvicorn has no time-out for
a body that stalls, so the app bounds that read.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from typing import Any

from models_local.serve.fair import per_client_default

MAX_PIXELS = 40_000_000  # the app's cap on uploads (webui/host/uploads.py): the same here
MAX_AUDIO_SECONDS = 600.0
BODY_SECONDS = 30.0  # to receive a whole request body once its headers are in
IDLE_SECONDS = 5  # a kept-alive connection with no request closes after this
MAX_CONNECTIONS = 64  # connections and requests at once; beyond it uvicorn answers 503
# One client's requests at once (serve.fair): 0 means a quarter of max_connections.
MAX_PER_CLIENT = 0


class MediaRefused(ValueError):
    """The request's image or audio is over a limit or unreadable; the message says which."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    max_pixels: int = MAX_PIXELS
    max_audio_seconds: float = MAX_AUDIO_SECONDS
    body_seconds: float = BODY_SECONDS
    idle_seconds: int = IDLE_SECONDS
    max_connections: int = MAX_CONNECTIONS
    max_per_client: int = MAX_PER_CLIENT
    trusted_proxies: tuple[str, ...] = ()  # whose X-Forwarded-For names the client (serve.fair)

    def per_client(self) -> int:
        return min(self.max_per_client or per_client_default(self.max_connections), self.max_connections)

    def check(self, data: bytes, kind: str) -> None:
        """Raises MediaRefused (413 over a limit, 400 unreadable) from the header alone."""
        if kind == "image":
            self._check_image(data)
        elif kind == "audio":
            self._check_audio(data)

    def _check_image(self, data: bytes) -> None:
        from PIL import Image

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our cap is lower
                with Image.open(io.BytesIO(data)) as image:  # reads the header only
                    width, height = image.size
        except Image.DecompressionBombError:  # over twice Pillow's own cap: refused at the header
            raise MediaRefused("the image is too large to process", 413) from None
        except Exception as exc:  # noqa: BLE001 (Pillow raises many types for bad data)
            raise MediaRefused(f"the image could not be read ({type(exc).__name__})", 400) from None
        if width * height > self.max_pixels:
            raise MediaRefused(
                f"the image is {width}x{height} pixels, over this server's limit of "
                f"{self.max_pixels / 1e6:g} megapixels",
                413,
            )

    def _check_audio(self, data: bytes) -> None:
        import soundfile

        try:
            info = soundfile.info(io.BytesIO(data))
        except Exception as exc:  # noqa: BLE001 (libsndfile errors vary by format)
            raise MediaRefused(f"the audio could not be read ({type(exc).__name__})", 400) from None
        seconds = info.frames / info.samplerate if info.samplerate else float("inf")
        if seconds > self.max_audio_seconds:
            raise MediaRefused(
                f"the audio is {seconds:,.0f} s long, over this server's limit of "
                f"{self.max_audio_seconds:g} s",
                413,
            )

    def uvicorn_options(self) -> dict[str, Any]:
        """uvicorn.run's settings for these limits: idle connections close, and beyond
        `max_connections` at once a request is answered 503 at once instead of queued."""
        return {"timeout_keep_alive": self.idle_seconds, "limit_concurrency": self.max_connections}
