"""Audio tasks through models_local.run on tiny random-weight models loaded by path."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from stop_signal import StopAfter
from tiny_text_audio import write_tone

import models_local
from hugginggpt.tasks import TASKS
from models_local import RuntimeUnsupported


def run(task, folder, inputs, out):
    artifacts = models_local.run(task, folder, inputs, out)
    kinds = {a["kind"] for a in artifacts}
    assert set(TASKS[task].outputs) <= kinds, f"{task} must produce {TASKS[task].outputs}, got {kinds}"
    return {a["kind"]: a.get("value", a.get("path")) for a in artifacts}


def assert_wav(path, out_dir, rate):
    assert path.endswith(".wav") and path.startswith(str(out_dir.resolve()))
    samples, sr = sf.read(path)
    assert sr == rate and samples.ndim == 1 and len(samples) > 0
    assert np.isfinite(samples).all()
    return samples


@pytest.mark.parametrize("fmt,rate,channels", [("wav", 22050, 2), ("flac", 16000, 1), ("ogg", 44100, 1)])
def test_asr_wav2vec2_ctc_reads_any_format(tiny, tmp_path, fmt, rate, channels):
    audio = write_tone(tmp_path / f"speech.{fmt}", seconds=1.0, rate=rate, channels=channels)
    text = run("automatic-speech-recognition", tiny("wav2vec2-ctc"), {"audio": str(audio)}, tmp_path)["text"]
    # the CTC vocabulary (random weights may also emit <s>, which the CTC pipeline keeps)
    letters = text.replace("<s>", "").replace("</s>", "").replace("<unk>", "")
    assert isinstance(text, str) and set(letters) <= set("abcdefghijklmnopqrstuvwxyz' ")


def test_asr_long_audio_is_chunked(tiny, tmp_path):
    audio = write_tone(tmp_path / "long.wav", seconds=32, rate=16000)  # over the 30 s chunk length
    text = run("automatic-speech-recognition", tiny("wav2vec2-ctc"), {"audio": str(audio)}, tmp_path)["text"]
    assert isinstance(text, str)


def test_asr_whisper(tiny, tmp_path):
    audio = write_tone(tmp_path / "speech.wav", seconds=2.0, rate=8000)
    text = run("automatic-speech-recognition", tiny("whisper"), {"audio": str(audio)}, tmp_path)["text"]
    assert isinstance(text, str) and "<|" not in text  # special tokens stripped


def test_a_stop_ends_whisper_at_the_next_token(tiny, tmp_path):
    audio = write_tone(tmp_path / "speech.wav", seconds=2.0, rate=8000)
    stop = StopAfter(1)
    with pytest.raises(models_local.Stopped):
        models_local.run(
            "automatic-speech-recognition", tiny("whisper"), {"audio": str(audio)}, tmp_path, stop=stop
        )
    assert stop.asked >= 2  # generate() looked


def test_audio_classification(tiny, tmp_path):
    audio = write_tone(tmp_path / "sound.flac", seconds=1.0, rate=48000)
    got = run("audio-classification", tiny("wav2vec2-audio-classifier"), {"audio": str(audio)}, tmp_path)
    labels = got["data"]
    assert {item["label"] for item in labels} == {"speech", "music", "noise", "silence"}
    assert sum(item["score"] for item in labels) == pytest.approx(1.0, abs=1e-3)
    assert got["text"].startswith(labels[0]["label"])


def test_tts_vits(tiny, tmp_path):
    path = run("text-to-speech", tiny("vits"), {"text": "hello world"}, tmp_path)["audio"]
    assert_wav(path, tmp_path, 16000)


def test_tts_vits_refuses_text_outside_its_alphabet_clearly(tiny, tmp_path):
    path = run("text-to-speech", tiny("vits"), {"text": "dog ."}, tmp_path)["audio"]  # a terse caption
    assert_wav(path, tmp_path, 16000)
    with pytest.raises(ValueError, match="cannot speak any character of '123'"):
        models_local.run("text-to-speech", tiny("vits"), {"text": "123"}, tmp_path)


def test_tts_speecht5_with_its_vocoder(tiny, tmp_path):
    path = run("text-to-speech", tiny("speecht5-tts"), {"text": "hello world"}, tmp_path)["audio"]
    samples = assert_wav(path, tmp_path, 16000)
    assert len(samples) % 16 == 0  # whole vocoder frames: 2 reduction x (4 x 4) upsampling per mel frame


def test_audio_to_audio_speecht5_voice_conversion(tiny, tmp_path):
    audio = write_tone(tmp_path / "voice.wav", seconds=1.0, rate=22050)
    path = run("audio-to-audio", tiny("speecht5-vc"), {"audio": str(audio)}, tmp_path)["audio"]
    assert_wav(path, tmp_path, 16000)


def test_audio_to_audio_refuses_other_architectures(tiny, tmp_path):
    audio = write_tone(tmp_path / "voice.wav", seconds=0.2)
    with pytest.raises(RuntimeUnsupported, match="audio-to-audio"):
        models_local.run("audio-to-audio", tiny("wav2vec2-ctc"), {"audio": str(audio)}, tmp_path)


def test_speecht5_generation_stays_within_its_positions(tiny):
    from transformers import AutoConfig

    from models_local.handlers.audio import _maxlenratio, _speech_frames

    config = AutoConfig.from_pretrained(tiny("speecht5-vc"))
    for samples in (16000, 160000):
        frames = _speech_frames(config, samples)
        assert (
            int(frames * _maxlenratio(config, frames) / config.reduction_factor)
            <= config.max_speech_positions - 2
        )
    assert _speech_frames(config, 16000) == ((16000 - 10) // 5 + 1 - 4) // 4 + 1


@pytest.mark.parametrize(
    "task,name",
    [
        ("automatic-speech-recognition", "whisper"),
        ("audio-classification", "wav2vec2-audio-classifier"),
        (
            "audio-to-audio",
            "speecht5-vc",
        ),  # the speaker vector and vocoder casts are shared with SpeechT5 TTS
    ],
)
def test_half_precision_paths(tiny, tmp_path, task, name):
    """What a GPU runs: weights in float16, inputs, speaker vector and vocoder cast to match (here on CPU)."""
    import torch

    from models_local import Runtime
    from models_local.handlers.base import Device

    runtime = Runtime(memory_budget_bytes=2**30, device="cpu")
    runtime.device = Device("cpu", torch.float16)
    audio = write_tone(tmp_path / "in.wav", seconds=1.0, rate=16000)
    inputs = {"text": "hello world"} if task == "text-to-speech" else {"audio": str(audio)}
    artifacts = runtime.run(task, tiny(name), inputs, tmp_path)
    assert set(TASKS[task].outputs) <= {a["kind"] for a in artifacts}
    (entry,) = runtime._cache.entries.values()
    assert entry.obj.model.dtype == torch.float16
