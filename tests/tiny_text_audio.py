"""Tiny random-weight models for the text, audio and tabular handlers, built locally, offline.

Each builder writes a complete model folder (config, weights, tokenizer or processor) the way a hub
repo looks, so the runtime loads it through its real loading code. Outputs are noise: the tests
check wiring, types and files. The `tiny` session fixture (registered in conftest.py) builds each
model once per session, on first use: tiny("bert-classifier") is its folder.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "on",
    "mat",
    "paris",
    "is",
    "in",
    "france",
    "what",
    "where",
    "who",
    "hello",
    "world",
    "summarize",
    "translate",
    "english",
    "german",
    "speech",
    "sound",
    "music",
    "good",
    "bad",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant:{% endif %}"
)


# ---- tokenizers ----------------------------------------------------------------------------------


def bert_tokenizer(folder: Path):
    from transformers import BertTokenizer

    vocab = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *WORDS,
        *"abcdefghijklmnopqrstuvwxyz0123456789?.,!'",
        *("##" + c for c in "abcdefghijklmnopqrstuvwxyz"),
    ]
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(dict.fromkeys(vocab))})
    tok.save_pretrained(folder)
    return tok


def bpe_tokenizer(folder: Path, *, chat: bool = False, extra_special: tuple[str, ...] = ()):
    """A byte-level BPE tokenizer (GPT-2 style) trained on a few words."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=["<pad>", "</s>", "<unk>", "<s>", *extra_special],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator([" ".join(WORDS)] * 5, trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", bos_token="<s>"
    )
    if chat:
        tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(folder)
    return tok


# ---- text models ---------------------------------------------------------------------------------


def _bert_config(tok, **kw):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=128,
        **kw,
    )


def bert_classifier(folder: Path) -> None:
    from transformers import BertForSequenceClassification

    tok = bert_tokenizer(folder)
    labels = ["negative", "neutral", "positive"]
    config = _bert_config(
        tok, id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)}
    )
    BertForSequenceClassification(config).save_pretrained(folder)


def bert_tagger(folder: Path) -> None:
    from transformers import BertForTokenClassification

    tok = bert_tokenizer(folder)
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    config = _bert_config(
        tok, id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)}
    )
    BertForTokenClassification(config).save_pretrained(folder)


def bert_qa(folder: Path) -> None:
    from transformers import BertForQuestionAnswering

    BertForQuestionAnswering(_bert_config(bert_tokenizer(folder))).save_pretrained(folder)


def bert_embedder(folder: Path) -> None:
    """A sentence-transformers style folder: the encoder at the root, a pooling module beside it."""
    from transformers import BertModel

    BertModel(_bert_config(bert_tokenizer(folder))).save_pretrained(folder)
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": 32,
                "pooling_mode_mean_tokens": True,
                "pooling_mode_cls_token": False,
            }
        )
    )
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )


def bert_embedder_dense(folder: Path) -> None:
    """Like bert_embedder, with CLS pooling and a Dense layer (32 -> 8, tanh), as LaBSE or distiluse have."""
    import torch
    from safetensors.torch import save_file

    bert_embedder(folder)
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": 32,
                "pooling_mode_mean_tokens": False,
                "pooling_mode_cls_token": True,
            }
        )
    )
    (folder / "2_Dense").mkdir()
    (folder / "2_Dense" / "config.json").write_text(
        json.dumps(
            {
                "in_features": 32,
                "out_features": 8,
                "bias": True,
                "activation_function": "torch.nn.modules.activation.Tanh",
            }
        )
    )
    linear = torch.nn.Linear(32, 8)
    save_file(
        {f"linear.{k}": v.contiguous() for k, v in linear.state_dict().items()},
        str(folder / "2_Dense" / "model.safetensors"),
    )
    modules = json.loads((folder / "modules.json").read_text())
    modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))


def t5(folder: Path) -> None:
    from transformers import GenerationConfig, T5Config, T5ForConditionalGeneration

    tok = bpe_tokenizer(folder)
    config = T5Config(
        vocab_size=len(tok),
        d_model=32,
        d_ff=37,
        d_kv=8,
        num_layers=2,
        num_heads=2,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.pad_token_id,
        task_specific_params={
            "summarization": {"prefix": "summarize: "},
            "translation_en_to_de": {"prefix": "translate English to German: "},
        },
    )
    T5ForConditionalGeneration(config).save_pretrained(folder)
    GenerationConfig(
        decoder_start_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        max_new_tokens=8,
    ).save_pretrained(folder)


def _short_generation(folder: Path, tok) -> None:
    """A generation config with a small max_new_tokens, which the handlers honour: fast tests."""
    from transformers import GenerationConfig

    GenerationConfig(
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        max_new_tokens=16,
    ).save_pretrained(folder)


def gpt2(folder: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = bpe_tokenizer(folder)
    GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(tok),
            n_embd=32,
            n_layer=2,
            n_head=2,
            n_positions=256,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
        )
    ).save_pretrained(folder)
    _short_generation(folder, tok)


def llama_chat(folder: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = bpe_tokenizer(folder, chat=True)
    LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tok),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=256,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
    ).save_pretrained(folder)
    _short_generation(folder, tok)


# ---- audio models --------------------------------------------------------------------------------

CHARS = list("abcdefghijklmnopqrstuvwxyz'")


def _wav2vec2_config(**kw):
    from transformers import Wav2Vec2Config

    return Wav2Vec2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=37,
        conv_dim=(16, 16, 16),
        conv_stride=(5, 4, 4),
        conv_kernel=(10, 4, 4),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        **kw,
    )


def _wav2vec2_features():
    from transformers import Wav2Vec2FeatureExtractor

    return Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True, return_attention_mask=False
    )


def wav2vec2_ctc(folder: Path) -> None:
    from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2ForCTC, Wav2Vec2Processor

    vocab = {t: i for i, t in enumerate(["<pad>", "<s>", "</s>", "<unk>", "|", *CHARS])}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    tokenizer = Wav2Vec2CTCTokenizer(str(folder / "vocab.json"))
    Wav2Vec2Processor(feature_extractor=_wav2vec2_features(), tokenizer=tokenizer).save_pretrained(folder)
    Wav2Vec2ForCTC(_wav2vec2_config(vocab_size=len(vocab), pad_token_id=0)).save_pretrained(folder)


def wav2vec2_audio_classifier(folder: Path) -> None:
    from transformers import Wav2Vec2ForSequenceClassification

    labels = ["speech", "music", "noise", "silence"]
    _wav2vec2_features().save_pretrained(folder)
    config = _wav2vec2_config(
        id2label=dict(enumerate(labels)),
        label2id={n: i for i, n in enumerate(labels)},
        classifier_proj_size=16,
    )
    Wav2Vec2ForSequenceClassification(config).save_pretrained(folder)


WHISPER_SPECIAL = (
    "<|endoftext|>",
    "<|startoftranscript|>",
    "<|en|>",
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nocaptions|>",
    "<|notimestamps|>",
)


def whisper(folder: Path) -> None:
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    bpe = bpe_tokenizer(folder / "_bpe")
    vocab = dict(bpe.get_vocab())
    for token in WHISPER_SPECIAL:
        vocab.setdefault(token, len(vocab))
    merges = json.loads(bpe.backend_tokenizer.to_str())["model"]["merges"]
    tokenizer = WhisperTokenizer(
        vocab=vocab, merges=[tuple(m) if isinstance(m, list) else tuple(m.split()) for m in merges]
    )
    tokenizer.add_special_tokens({"additional_special_tokens": list(WHISPER_SPECIAL[1:])})
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in WHISPER_SPECIAL}
    WhisperProcessor(WhisperFeatureExtractor(feature_size=80), tokenizer).save_pretrained(folder)
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    config = WhisperConfig(
        vocab_size=len(tokenizer),
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        num_mel_bins=80,
        max_source_positions=1500,
        max_target_positions=64,
        pad_token_id=eot,
        bos_token_id=eot,
        eos_token_id=eot,
        decoder_start_token_id=sot,
        begin_suppress_tokens=None,
        suppress_tokens=None,
    )
    WhisperForConditionalGeneration(config).save_pretrained(folder)
    # Whisper's generate reads its language/task/timestamp token ids from the generation config.
    GenerationConfig(
        decoder_start_token_id=sot,
        eos_token_id=eot,
        pad_token_id=eot,
        bos_token_id=eot,
        max_length=24,
        is_multilingual=True,
        lang_to_id={"<|en|>": ids["<|en|>"]},
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        no_timestamps_token_id=ids["<|notimestamps|>"],
        begin_suppress_tokens=[],
        suppress_tokens=[],
    ).save_pretrained(folder)


def vits(folder: Path) -> None:
    from transformers import VitsConfig, VitsModel, VitsTokenizer

    # punctuation too, as in the MMS voices, so a captioner's "dog ." has something to say
    vocab = {t: i for i, t in enumerate(["<pad>", "<unk>", " ", *CHARS, *".,?!-"])}
    (folder / "vocab.json").write_text(json.dumps(vocab))
    VitsTokenizer(str(folder / "vocab.json"), phonemize=False, add_blank=True).save_pretrained(folder)
    config = VitsConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        ffn_dim=16,
        flow_size=16,
        spectrogram_bins=17,
        upsample_initial_channel=16,
        upsample_rates=[4, 4],
        upsample_kernel_sizes=[8, 8],
        resblock_kernel_sizes=[3],
        resblock_dilation_sizes=[[1, 3]],
        duration_predictor_filter_channels=16,
        prior_encoder_num_flows=1,
        prior_encoder_num_wavenet_layers=1,
        posterior_encoder_num_wavenet_layers=1,
        duration_predictor_num_flows=1,
        depth_separable_num_layers=1,
        sampling_rate=16000,
    )
    VitsModel(config).save_pretrained(folder)


def _speecht5_processor(folder: Path):
    import io

    import sentencepiece as spm
    from transformers import SpeechT5FeatureExtractor, SpeechT5Processor, SpeechT5Tokenizer

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([" ".join(WORDS)] * 20),
        model_writer=buffer,
        vocab_size=40,
        model_type="char",
        character_coverage=1.0,
        pad_id=0,
        bos_id=1,
        eos_id=2,
        unk_id=3,
        minloglevel=2,
    )
    (folder / "spm_char.model").write_bytes(buffer.getvalue())
    tokenizer = SpeechT5Tokenizer(str(folder / "spm_char.model"))
    processor = SpeechT5Processor(SpeechT5FeatureExtractor(), tokenizer)
    processor.save_pretrained(folder)
    return processor


def _speecht5(folder: Path, model_class: str) -> None:
    import transformers
    from transformers import SpeechT5Config, SpeechT5HifiGan, SpeechT5HifiGanConfig

    processor = _speecht5_processor(folder)
    config = SpeechT5Config(
        vocab_size=len(processor.tokenizer),
        hidden_size=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        speech_decoder_prenet_units=32,
        speech_decoder_postnet_units=32,
        speech_decoder_postnet_layers=2,
        speaker_embedding_dim=16,
        num_mel_bins=80,
        reduction_factor=2,
        conv_dim=(16, 16),
        conv_stride=(5, 4),
        conv_kernel=(10, 4),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        max_text_positions=256,
        max_speech_positions=64,
    )
    getattr(transformers, model_class)(config).save_pretrained(folder)
    vocoder = SpeechT5HifiGanConfig(
        model_in_dim=80,
        upsample_initial_channel=32,
        upsample_rates=[4, 4],
        upsample_kernel_sizes=[8, 8],
        resblock_kernel_sizes=[3],
        resblock_dilation_sizes=[[1, 3]],
        sampling_rate=16000,
    )
    SpeechT5HifiGan(vocoder).save_pretrained(folder / "vocoder")


def speecht5_tts(folder: Path) -> None:
    _speecht5(folder, "SpeechT5ForTextToSpeech")


def speecht5_vc(folder: Path) -> None:
    _speecht5(folder, "SpeechT5ForSpeechToSpeech")


def write_tone(
    path: Path, *, seconds: float = 1.0, rate: int = 22050, channels: int = 1, fmt: str | None = None
) -> Path:
    """A 440 Hz tone (with some noise) written by soundfile: wav, flac or ogg by the suffix."""
    import numpy as np
    import soundfile as sf

    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(0)
    mono = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.01 * rng.standard_normal(t.size)
    data = np.stack([mono] * channels, axis=1) if channels > 1 else mono
    sf.write(str(path), data.astype(np.float32), rate, format=fmt)
    return path


# ---- tabular -------------------------------------------------------------------------------------

IRIS_COLUMNS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def _fit_classifier():
    """A scikit-learn pipeline fitted on a few made-up rows with named columns."""
    import numpy as np
    import pandas as pd
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    small = rng.normal(1.0, 0.2, size=(20, 4))
    large = rng.normal(5.0, 0.2, size=(20, 4))
    frame = pd.DataFrame(np.vstack([small, large]), columns=IRIS_COLUMNS)
    labels = ["setosa"] * 20 + ["virginica"] * 20
    return make_pipeline(StandardScaler(), LogisticRegression()).fit(frame, labels)


def _skops_config(folder: Path, file: str) -> None:
    (folder / "config.json").write_text(
        json.dumps(
            {"sklearn": {"columns": IRIS_COLUMNS, "model": {"file": file}, "task": "tabular-classification"}}
        )
    )


def sklearn_skops(folder: Path) -> None:
    import skops.io as sio

    sio.dump(_fit_classifier(), folder / "model.skops")
    _skops_config(folder, "model.skops")


def sklearn_pickle(folder: Path) -> None:
    import joblib

    joblib.dump(_fit_classifier(), folder / "model.joblib")
    _skops_config(folder, "model.joblib")


# ---- registry and fixture ------------------------------------------------------------------------

BUILDERS: dict[str, Callable[[Path], None]] = {
    "bert-classifier": bert_classifier,
    "bert-tagger": bert_tagger,
    "bert-qa": bert_qa,
    "bert-embedder": bert_embedder,
    "bert-embedder-dense": bert_embedder_dense,
    "t5": t5,
    "gpt2": gpt2,
    "llama-chat": llama_chat,
    "wav2vec2-ctc": wav2vec2_ctc,
    "wav2vec2-audio-classifier": wav2vec2_audio_classifier,
    "whisper": whisper,
    "vits": vits,
    "speecht5-tts": speecht5_tts,
    "speecht5-vc": speecht5_vc,
    "sklearn-skops": sklearn_skops,
    "sklearn-pickle": sklearn_pickle,
}


class TinyModels:
    """Builds each tiny model once, on first request, into its own folder under `root`."""

    def __init__(self, root: Path, builders: dict[str, Callable[[Path], None]] | None = None) -> None:
        self.root = Path(root)
        self.builders = builders or BUILDERS
        self._lock = threading.Lock()

    def __call__(self, name: str) -> str:
        folder = self.root / name
        with self._lock:
            if not (folder / ".done").exists():
                import torch

                torch.manual_seed(0)
                folder.mkdir(parents=True, exist_ok=True)
                self.builders[name](folder)
                (folder / ".done").touch()
        return str(folder)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> TinyModels:
    return TinyModels(tmp_path_factory.mktemp("tiny_text_audio"))
