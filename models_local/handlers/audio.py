"""Audio tasks: speech recognition, audio classification, text-to-speech, speech-to-speech.

Audio comes in through models_local.io.read_audio (soundfile + scipy resampling), so neither ffmpeg
nor torchaudio is needed; audio goes out as WAV through Outputs.audio.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from models_local.handlers.base import (
    Batching,
    Device,
    Everyone,
    Handler,
    Outputs,
    RuntimeUnsupported,
    seeded,
    stopping_criteria,
)
from models_local.handlers.bundle import Bundle, load_model, tensors_to
from models_local.handlers.labels import write_labels
from models_local.io import read_audio

# SpeechT5 predicts mel spectrograms; a repo without its own "vocoder" folder uses this one.
DEFAULT_VOCODER = "microsoft/speecht5_hifigan"
CHUNK_SECONDS = 30  # longer recordings are transcribed in overlapping chunks


def _config(folder: str) -> Any:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(folder)


# ---- automatic-speech-recognition ----------------------------------------------------------------


def _load_asr(folder: str, device: Device) -> Bundle:
    from transformers import AutoProcessor, pipeline

    # Whisper-style encoder-decoders generate text; CTC models (Wav2Vec2, HuBERT, ...) decode frames.
    auto = "AutoModelForSpeechSeq2Seq" if _config(folder).is_encoder_decoder else "AutoModelForCTC"
    model = load_model(auto, folder, device)
    processor = AutoProcessor.from_pretrained(folder)
    tokenizer = processor.tokenizer
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:  # a batch pads its texts
        tokenizer.pad_token = tokenizer.eos_token
    asr = pipeline(
        "automatic-speech-recognition",
        model=model,
        tokenizer=processor.tokenizer,
        feature_extractor=processor.feature_extractor,
        device=model.device,
    )
    return Bundle(model, processor, device, extra=asr)


def _transcribe(b: Bundle, inputs: dict[str, str], out: Outputs) -> None:
    rate = b.processor.feature_extractor.sampling_rate
    samples = read_audio(inputs["audio"], rate)
    kwargs: dict[str, Any] = {"chunk_length_s": CHUNK_SECONDS} if len(samples) > CHUNK_SECONDS * rate else {}
    if b.model.config.is_encoder_decoder:  # Whisper generates: a Stop ends it at the next token
        kwargs["generate_kwargs"] = stopping_criteria(out)
    result = b.extra({"raw": samples, "sampling_rate": rate}, **kwargs)
    out.check_stop()
    out.text(result["text"].strip())


def _transcribe_batch(b: Bundle, inputs: list[dict[str, str]], outs: list[Outputs]) -> None:
    """Recordings as one pipeline call, per group that one forward pass reads as it reads each
    alone: Whisper pads every recording to 30 s anyway (one group); a CTC model without an
    attention mask would hear the padding, so its groups are recordings of the same length. Long
    recordings (chunked) go one by one. No seed: recognition does not sample."""
    rate = b.processor.feature_extractor.sampling_rate
    groups: dict[int, list[int]] = {}
    for n, i in enumerate(inputs):
        samples = read_audio(i["audio"], rate)
        if len(samples) > CHUNK_SECONDS * rate:
            _transcribe(b, i, outs[n])
        else:
            length = -1 if b.model.config.is_encoder_decoder else len(samples)
            groups.setdefault(length, []).append(n)
    for members in groups.values():
        kwargs: dict[str, Any] = {"batch_size": len(members)}
        if b.model.config.is_encoder_decoder:
            kwargs["generate_kwargs"] = stopping_criteria(Everyone.of([outs[n] for n in members]))
        raw = [{"raw": read_audio(inputs[n]["audio"], rate), "sampling_rate": rate} for n in members]
        for n, result in zip(members, b.extra(raw, **kwargs), strict=True):
            outs[n].text(result["text"].strip())


# ---- audio-classification ------------------------------------------------------------------------


def _load_audio_classifier(folder: str, device: Device) -> Bundle:
    from transformers import AutoFeatureExtractor

    model = load_model("AutoModelForAudioClassification", folder, device)
    return Bundle(model, AutoFeatureExtractor.from_pretrained(folder), device)


def _classify_audio(b: Bundle, inputs: dict[str, str], out: Outputs) -> None:
    import torch

    rate = b.processor.sampling_rate
    features = b.processor(read_audio(inputs["audio"], rate), sampling_rate=rate, return_tensors="pt")
    with torch.inference_mode():
        logits = b.model(**tensors_to(features, b.device)).logits[0]
    write_labels(out, logits, b.model.config)


# ---- SpeechT5 pieces (text-to-speech and audio-to-audio) -----------------------------------------


def _vocoder(folder: str, device: Device) -> Any:
    """The HiFi-GAN that turns SpeechT5's spectrograms into sound: the repo's own, else the default."""
    from transformers import SpeechT5HifiGan

    own = Path(folder) / "vocoder"
    if (own / "config.json").is_file():
        source = str(own)
    else:
        from huggingface_hub import snapshot_download

        try:  # through the HF cache, honouring HF_HUB_OFFLINE, like every other model
            source = snapshot_download(DEFAULT_VOCODER, allow_patterns=["*.json", "*.safetensors", "*.bin"])
        except Exception as exc:
            raise RuntimeUnsupported(
                f"SpeechT5 needs the vocoder {DEFAULT_VOCODER}, not available: {exc}"
            ) from exc
    vocoder = SpeechT5HifiGan.from_pretrained(source, dtype=device.dtype)
    # PreTrainedModel.to is wrapped by functools.wraps, whose typeshed type loses the method's self
    return vocoder.to(device.name).eval()  # type: ignore[arg-type]


def _speaker(folder: str, model: Any) -> Any:
    """The x-vector that picks SpeechT5's voice: speaker_embeddings.npy in the repo, else a neutral zero."""
    import numpy as np
    import torch

    path = Path(folder) / "speaker_embeddings.npy"
    dim = model.config.speaker_embedding_dim
    vector = np.load(path).reshape(-1)[:dim] if path.is_file() else np.zeros(dim, dtype=np.float32)
    return torch.tensor(vector, dtype=model.dtype, device=model.device).reshape(1, dim)


def _speecht5(auto: str, folder: str, device: Device) -> Bundle:
    from transformers import SpeechT5Processor

    model = load_model(auto, folder, device)
    return Bundle(
        model,
        SpeechT5Processor.from_pretrained(folder),
        device,
        extra={"vocoder": _vocoder(folder, device), "speaker": _speaker(folder, model)},
    )


def _maxlenratio(config: Any, encoder_length: int) -> float:
    """SpeechT5 generates up to encoder_length * ratio / reduction frames; the decoder's positions cap it."""
    return min(20.0, (config.max_speech_positions - 2) * config.reduction_factor / max(encoder_length, 1))


def _speech_frames(config: Any, samples: int) -> int:
    """Frames the speech encoder's convolutions make of `samples` (the same arithmetic as the model)."""
    for kernel, stride in zip(config.conv_kernel, config.conv_stride, strict=True):
        samples = (samples - kernel) // stride + 1
    return max(samples, 0)


def _write_speech(b: Bundle, waveform: Any, out: Outputs) -> None:
    rate = getattr(b.extra["vocoder"].config, "sampling_rate", 16000)
    out.audio(waveform.float().cpu().numpy(), rate)


# ---- text-to-speech ------------------------------------------------------------------------------


def _load_tts(folder: str, device: Device) -> Bundle:
    kind = _config(folder).model_type
    if kind == "speecht5":
        return _speecht5("SpeechT5ForTextToSpeech", folder, device)
    if kind == "vits":
        from transformers import AutoTokenizer, VitsModel

        tokenizer = AutoTokenizer.from_pretrained(folder)
        if getattr(tokenizer, "phonemize", False):
            try:
                import phonemizer  # noqa: F401
            except ImportError as exc:  # the English VITS models spell through espeak phonemes
                raise RuntimeUnsupported("this VITS model needs the phonemizer package and espeak") from exc
        model = VitsModel.from_pretrained(folder, dtype=device.dtype)
        model = model.to(device.name).eval()  # type: ignore[arg-type]  # as in _vocoder: functools.wraps
        return Bundle(model, tokenizer, device)
    raise RuntimeUnsupported(f"no local text-to-speech path for {kind!r} models (served: vits, speecht5)")


def _speak(b: Bundle, inputs: dict[str, str], out: Outputs) -> None:
    import torch

    if b.model.config.model_type == "vits":
        enc = b.processor(inputs["text"], return_tensors="pt")
        if (
            enc["input_ids"].shape[-1] == 0
        ):  # VITS drops characters outside its alphabet; nothing left crashes it
            raise ValueError(f"this voice cannot speak any character of {inputs['text'][:80]!r}")
        with torch.inference_mode(), seeded(inputs):  # VITS draws noise for durations and the flow
            waveform = b.model(**tensors_to(enc, b.device)).waveform[0]
        out.audio(waveform.float().cpu().numpy(), b.model.config.sampling_rate)
        return
    enc = b.processor(text=inputs["text"], return_tensors="pt")
    ids = enc["input_ids"][:, : b.model.config.max_text_positions].to(b.device.name)
    with torch.inference_mode(), seeded(inputs):  # SpeechT5 keeps its pre-net dropout on when speaking
        waveform = b.model.generate_speech(
            ids,
            b.extra["speaker"],
            vocoder=b.extra["vocoder"],
            maxlenratio=_maxlenratio(b.model.config, ids.shape[-1]),
        )
    _write_speech(b, waveform, out)


def _speak_batch(b: Bundle, inputs: list[dict[str, str]], outs: list[Outputs]) -> None:
    """VITS texts without a seed, one forward pass per group of texts of the same length in tokens:
    its vocoder would hear a shorter text's padding in its last frames. A member with a seed speaks
    alone: VITS draws its noise from torch's process-wide generator, one tensor for the whole
    batch, so in a batch a seed could not give the voice it gives alone. SpeechT5: one by one."""
    import torch

    groups: dict[int, list[int]] = {}
    for n, i in enumerate(inputs):
        if b.model.config.model_type == "vits" and i.get("seed") is None:
            groups.setdefault(len(b.processor(i["text"])["input_ids"]), []).append(n)
        else:
            _speak(b, i, outs[n])
    for length, members in groups.items():
        if len(members) == 1 or not length:  # one text, or nothing the voice can say (fails alone)
            _speak(b, inputs[members[0]], outs[members[0]])
            continue
        enc = b.processor([inputs[n]["text"] for n in members], return_tensors="pt")
        with torch.inference_mode():
            waveforms = b.model(**tensors_to(enc, b.device)).waveform
        for n, waveform in zip(members, waveforms, strict=True):
            outs[n].audio(waveform.float().cpu().numpy(), b.model.config.sampling_rate)


# ---- audio-to-audio ------------------------------------------------------------------------------


def _load_voice_converter(folder: str, device: Device) -> Bundle:
    kind = _config(folder).model_type
    if kind != "speecht5":
        raise RuntimeUnsupported(f"no local audio-to-audio path for {kind!r} models (served: speecht5)")
    return _speecht5("SpeechT5ForSpeechToSpeech", folder, device)


def _convert(b: Bundle, inputs: dict[str, str], out: Outputs) -> None:
    import torch

    config = b.model.config
    rate = b.processor.feature_extractor.sampling_rate
    samples = read_audio(inputs["audio"], rate)
    per_frame = math.prod(config.conv_stride)
    samples = samples[
        : (config.max_speech_positions - 2) * per_frame
    ]  # what the encoder's positions can hold
    features = b.processor(audio=samples, sampling_rate=rate, return_tensors="pt")
    values = features["input_values"].to(b.device.name, b.model.dtype)
    ratio = _maxlenratio(config, _speech_frames(config, values.shape[-1]))
    with torch.inference_mode():
        waveform = b.model.generate_speech(
            values, b.extra["speaker"], vocoder=b.extra["vocoder"], maxlenratio=ratio
        )
    _write_speech(b, waveform, out)


HANDLERS: dict[str, Handler] = {
    "automatic-speech-recognition": Handler(
        _load_asr, _transcribe, batch=Batching(_transcribe_batch, frozenset({"audio"}))
    ),
    "audio-classification": Handler(_load_audio_classifier, _classify_audio),
    "text-to-speech": Handler(_load_tts, _speak, batch=Batching(_speak_batch, frozenset({"text", "seed"}))),
    "audio-to-audio": Handler(_load_voice_converter, _convert),
}
