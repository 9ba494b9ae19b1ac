"""Regenerate the app's example files in assets/: all drawn or synthesised here, no third-party media.

    python tools/make_assets.py

street.png: a street scene drawn with Pillow (sky, sun, houses, a car, a tree, a person).
speech.wav: a speech-like signal: a voiced source with a gliding pitch, shaped by moving formant
resonances into syllables (about four per second), 16 kHz mono. It sounds like babble, not words.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ASSETS = Path(__file__).resolve().parent.parent / "assets"


def draw_street(path: Path, size: tuple[int, int] = (512, 384)) -> None:
    from PIL import Image, ImageDraw

    w, h = size
    image = Image.new("RGB", size, (135, 190, 235))
    d = ImageDraw.Draw(image)
    for y in range(h // 2):  # a sky that pales towards the horizon
        t = y / (h / 2)
        d.line([(0, y), (w, y)], fill=(int(110 + 90 * t), int(170 + 50 * t), int(230 + 15 * t)))
    d.ellipse((w - 110, 30, w - 50, 90), fill=(255, 215, 80))
    d.rectangle((0, int(h * 0.62), w, h), fill=(90, 90, 95))  # road
    d.rectangle((0, int(h * 0.58), w, int(h * 0.62)), fill=(170, 170, 160))  # pavement
    for x in range(20, w, 80):
        d.rectangle((x, int(h * 0.8), x + 40, int(h * 0.81)), fill=(240, 240, 240))
    houses = [(20, 120, (200, 90, 70)), (150, 90, (230, 200, 120)), (290, 140, (120, 150, 190))]
    for x, top, colour in houses:
        d.rectangle((x, top, x + 120, int(h * 0.58)), fill=colour)
        d.polygon([(x - 10, top), (x + 60, top - 50), (x + 130, top)], fill=(120, 60, 50))
        for wx in (x + 15, x + 70):
            d.rectangle((wx, top + 25, wx + 30, top + 55), fill=(250, 250, 210), outline=(60, 60, 60))
        d.rectangle((x + 48, int(h * 0.58) - 60, x + 72, int(h * 0.58)), fill=(90, 60, 40))
    d.rectangle((440, 170, 452, int(h * 0.6)), fill=(100, 70, 40))  # tree
    d.ellipse((405, 110, 490, 200), fill=(60, 140, 60))
    d.rounded_rectangle((120, 250, 290, 300), radius=14, fill=(200, 30, 40))  # car
    d.polygon([(155, 250), (180, 218), (245, 218), (270, 250)], fill=(190, 25, 35))
    d.polygon([(165, 248), (184, 224), (212, 224), (212, 248)], fill=(180, 220, 240))
    for cx in (160, 255):
        d.ellipse((cx - 20, 285, cx + 20, 325), fill=(25, 25, 25))
        d.ellipse((cx - 8, 297, cx + 8, 313), fill=(160, 160, 160))
    d.ellipse((352, 180, 374, 202), fill=(240, 200, 170))  # a person
    d.rectangle((354, 202, 372, 245), fill=(40, 80, 160))
    d.line([(358, 245), (352, 280)], fill=(30, 30, 30), width=5)
    d.line([(368, 245), (374, 280)], fill=(30, 30, 30), width=5)
    image.save(path, optimize=True)


def synth_speech(path: Path, *, seconds: float = 2.5, rate: int = 16_000, seed: int = 7) -> None:
    import soundfile

    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    pitch = 120 + 25 * np.sin(2 * np.pi * 0.6 * t) + 10 * np.sin(2 * np.pi * 3.1 * t)  # Hz
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    syllables = int(seconds * 4)
    # per syllable: two formant frequencies (vowel-like), blended smoothly over time
    f1 = np.repeat(rng.uniform(300, 800, syllables), len(t) // syllables + 1)[: len(t)]
    f2 = np.repeat(rng.uniform(900, 2300, syllables), len(t) // syllables + 1)[: len(t)]
    kernel = np.hanning(801) / np.hanning(801).sum()
    f1, f2 = np.convolve(f1, kernel, "same"), np.convolve(f2, kernel, "same")
    voice = np.zeros_like(t)
    for k in range(1, 30):  # harmonics, loud where they fall near a formant
        freq = k * pitch
        gain = np.exp(-(((freq - f1) / 120) ** 2)) + 0.6 * np.exp(-(((freq - f2) / 180) ** 2)) + 0.02
        voice += gain * np.sin(k * phase) * (freq < rate / 2)
    envelope = np.clip(np.sin(np.pi * (t * 4) % np.pi), 0, 1) ** 0.7  # syllable rhythm with short gaps
    envelope *= np.minimum(1, np.minimum(t, seconds - t) / 0.05)
    noise = 0.02 * rng.standard_normal(len(t))
    signal = voice * envelope + noise
    signal = 0.5 * signal / np.abs(signal).max()
    soundfile.write(path, signal.astype(np.float32), rate, subtype="PCM_16")


def main() -> None:
    ASSETS.mkdir(exist_ok=True)
    draw_street(ASSETS / "street.png")
    synth_speech(ASSETS / "speech.wav")
    for p in sorted(ASSETS.iterdir()):
        print(f"{p.relative_to(ASSETS.parent)}: {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
