"""Speech recognition and synthesis in batches (models_local/handlers/audio.py): a batched call
gives what the same call gives alone, seeds included. Tiny Wav2Vec2, Whisper and VITS."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from test_serve_batching import WAIT_S, Gated, in_threads
from tiny_text_audio import write_tone

from models_local import Runtime


def batched(
    task: str, model: str, calls: dict[str, dict], tmp_path: Path, holder: dict
) -> tuple[dict, Gated]:
    """`calls` (name: (inputs, seed)) started while the model is held by `holder`, so that they
    queue up and run as one batch; their results by name."""
    gated = Gated(task)
    first = gated.hold(model, holder, tmp_path / "holder")
    run = gated.runtime.run
    results, threads = in_threads(
        {
            name: (lambda name=name, i=i, s=s: run(task, model, i, tmp_path / name, seed=s))
            for name, (i, s) in calls.items()
        }
    )
    gated.queued(len(calls))
    gated.gate.set()
    for t in [first, *threads.values()]:
        t.join(WAIT_S)
    return results, gated


def alone(task: str, model: str, calls: dict[str, tuple], tmp_path: Path) -> dict:
    runtime = Runtime(device="cpu", batch_window_s=0)
    return {
        name: runtime.run(task, model, i, tmp_path / f"alone-{name}", seed=s)
        for name, (i, s) in calls.items()
    }


def samples(artifacts: list[dict]) -> np.ndarray:
    (audio,) = [a for a in artifacts if a["kind"] == "audio"]
    return sf.read(audio["path"])[0]


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("recordings")
    return {
        "a": str(write_tone(folder / "a.wav", seconds=1.0, rate=16000)),
        "b": str(write_tone(folder / "b.wav", seconds=1.0, rate=8000)),  # the same length once resampled
        "c": str(write_tone(folder / "c.flac", seconds=1.7, rate=16000)),
    }


@pytest.mark.parametrize("model", ["wav2vec2-ctc", "whisper"])
def test_recordings_transcribed_in_a_batch_read_as_they_read_alone(tiny, recordings, tmp_path, model):
    folder = tiny(model)
    calls = {name: ({"audio": path}, None) for name, path in recordings.items()}
    expected = alone("automatic-speech-recognition", folder, calls, tmp_path)
    results, gated = batched(
        "automatic-speech-recognition", folder, calls, tmp_path, {"audio": recordings["a"]}
    )
    assert [len(b) for b in gated.batches] == [1, 3]  # the holder alone, then the three as one
    assert results == expected
    assert all(r[0]["kind"] == "text" for r in results.values())


def test_seeded_voices_in_a_batch_are_the_voices_each_seed_gives_alone(tiny, tmp_path):
    folder = tiny("vits")
    calls = {str(s): ({"text": "hello world"}, s) for s in (1, 2, 3)}
    expected = alone("text-to-speech", folder, calls, tmp_path)
    assert not np.array_equal(samples(expected["1"]), samples(expected["2"]))  # the seed matters
    results, gated = batched("text-to-speech", folder, calls, tmp_path, {"text": "first"})
    assert [len(b) for b in gated.batches] == [1, 3]
    for name in calls:
        assert np.array_equal(samples(results[name]), samples(expected[name]))


@pytest.fixture(scope="module")
def quiet_vits(tiny, tmp_path_factory) -> str:
    """The tiny VITS without its noise: what it says depends on the text only, so a batch must say
    what each text says alone."""
    folder = tmp_path_factory.mktemp("quiet") / "vits"
    shutil.copytree(tiny("vits"), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(
        json.dumps({**config, "noise_scale": 0.0, "noise_scale_duration": 0.0})
    )
    return str(folder)


def test_texts_spoken_in_a_batch_sound_as_they_do_alone(quiet_vits, tmp_path):
    # three texts of one length share a forward pass; the longer one (its padding would reach
    # the vocoder's last frames) speaks on its own within the batch
    calls = {t: ({"text": t}, None) for t in ("hello", "world", "quiet", "a longer sentence")}
    expected = alone("text-to-speech", quiet_vits, calls, tmp_path)
    assert not np.array_equal(samples(expected["hello"]), samples(expected["world"]))
    results, gated = batched("text-to-speech", quiet_vits, calls, tmp_path, {"text": "first"})
    assert [len(b) for b in gated.batches] == [1, 4]
    for name in calls:
        got, want = samples(results[name]), samples(expected[name])
        assert got.shape == want.shape
        assert np.abs(got - want).max() < 1e-3
