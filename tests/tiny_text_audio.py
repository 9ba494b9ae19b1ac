"""Tiny random-weight models for the text, audio and tabular handlers, built locally, offline.

Each builder writes a complete model folder (config, weights, tokenizer or processor) the way a hub
repo looks, so the runtime loads it through its real loading code. Outputs are noise: the tests
check wiring, types and files. Import the fixtures from this module in a test module:

    from tests.tiny_text_audio import tiny  # noqa: F401  (pytest fixture)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

WORDS = ("the a cat dog sat on mat paris is in france what where who hello world summarize translate "
         "english german speech sound music good bad").split()
CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant:{% endif %}"
)


# ---- tokenizers ----------------------------------------------------------------------------------

def bert_tokenizer(folder: Path):
    from transformers import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *"abcdefghijklmnopqrstuvwxyz0123456789?.,!'",
             *("##" + c for c in "abcdefghijklmnopqrstuvwxyz")]
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
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<pad>", "</s>", "<unk>", "<s>", *extra_special],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator([" ".join(WORDS)] * 5, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                  bos_token="<s>")
    if chat:
        tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(folder)
    return tok


# ---- text models ---------------------------------------------------------------------------------

def _bert_config(tok, **kw):
    from transformers import BertConfig

    return BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=37, max_position_embeddings=128, **kw)


def bert_classifier(folder: Path) -> None:
    from transformers import BertForSequenceClassification

    tok = bert_tokenizer(folder)
    labels = ["negative", "neutral", "positive"]
    config = _bert_config(tok, id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)})
    BertForSequenceClassification(config).save_pretrained(folder)


def bert_tagger(folder: Path) -> None:
    from transformers import BertForTokenClassification

    tok = bert_tokenizer(folder)
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    config = _bert_config(tok, id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)})
    BertForTokenClassification(config).save_pretrained(folder)


def bert_qa(folder: Path) -> None:
    from transformers import BertForQuestionAnswering

    BertForQuestionAnswering(_bert_config(bert_tokenizer(folder))).save_pretrained(folder)


def bert_embedder(folder: Path) -> None:
    """A sentence-transformers style folder: the encoder at the root, a pooling module beside it."""
    from transformers import BertModel

    BertModel(_bert_config(bert_tokenizer(folder))).save_pretrained(folder)
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))


def t5(folder: Path) -> None:
    from transformers import GenerationConfig, T5Config, T5ForConditionalGeneration

    tok = bpe_tokenizer(folder)
    config = T5Config(vocab_size=len(tok), d_model=32, d_ff=37, d_kv=8, num_layers=2, num_heads=2,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                      decoder_start_token_id=tok.pad_token_id,
                      task_specific_params={"summarization": {"prefix": "summarize: "},
                                            "translation_en_to_de": {"prefix": "translate English to German: "}})
    T5ForConditionalGeneration(config).save_pretrained(folder)
    GenerationConfig(decoder_start_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                     pad_token_id=tok.pad_token_id, max_new_tokens=8).save_pretrained(folder)


def gpt2(folder: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = bpe_tokenizer(folder)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=2, n_positions=256,
                               bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)).save_pretrained(folder)


def llama_chat(folder: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = bpe_tokenizer(folder, chat=True)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                                 bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                 pad_token_id=tok.pad_token_id)).save_pretrained(folder)


# ---- registry and fixture ------------------------------------------------------------------------

BUILDERS: dict[str, Callable[[Path], None]] = {
    "bert-classifier": bert_classifier,
    "bert-tagger": bert_tagger,
    "bert-qa": bert_qa,
    "bert-embedder": bert_embedder,
    "t5": t5,
    "gpt2": gpt2,
    "llama-chat": llama_chat,
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
