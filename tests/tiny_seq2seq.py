"""Tiny random NLLB-, MADLAD- and Aya-shaped checkpoints, with tokenizers trained here, offline.

Each builder writes a folder laid out like a hub repository (model, generation config and
tokenizer side by side), loadable with `from_pretrained`:

- NLLB: `M2M100ForConditionalGeneration` and an `NllbTokenizer` (BPE trained with `tokenizers`)
  whose added special tokens are NLLB language codes; NLLB's id layout (<s> 0, <pad> 1, </s> 2,
  <unk> 3) and decoder start </s>.
- MADLAD: `T5ForConditionalGeneration` and a T5 sentencepiece tokenizer with `<2xx>` pieces
  (user-defined symbols, as in the released vocabulary).
- Aya: `MT5ForConditionalGeneration` and a T5 sentencepiece tokenizer.

The models are random, but their weights are large enough that different inputs give
different outputs, which the batching tests rely on.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from .tiny_mt5 import write_t5_sentencepiece

NLLB_LANGUAGES = (
    "eng_Latn",
    "fra_Latn",
    "deu_Latn",
    "zho_Hans",
    "zho_Hant",
    "est_Latn",
    "por_Latn",
)
MADLAD_LANGUAGES = ("en", "fr", "de", "zh", "zh_Hant", "et", "pt")
LETTERS = "abcdefghiklmnoprstuvyzéàü"
HAN = "水火山木日月人口心手目耳田雨雪風花鳥魚馬"


def pseudo_sentence(rng: random.Random, words: int) -> str:
    """Words of Latin letters with now and then a run of Han characters."""
    chosen = []
    for _ in range(words):
        alphabet, longest = (HAN, 3) if rng.random() < 0.2 else (LETTERS, 8)
        chosen.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, longest))))
    return " ".join(chosen)


def training_lines(seed: int, count: int = 400) -> list[str]:
    rng = random.Random(seed)
    return [pseudo_sentence(rng, rng.randint(3, 12)) for _ in range(count)]


def build_nllb(directory: Path, seed: int = 0) -> Path:
    import torch
    from tokenizers import SentencePieceBPETokenizer
    from transformers import M2M100Config, M2M100ForConditionalGeneration, NllbTokenizer

    bpe = SentencePieceBPETokenizer()
    bpe.train_from_iterator(
        training_lines(seed),
        vocab_size=240,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
        show_progress=False,
    )
    trained = json.loads(bpe.to_str())["model"]
    tokenizer = NllbTokenizer(
        vocab=trained["vocab"],
        # transformers takes merge pairs, though its annotation names only strings.
        merges=[tuple(merge) for merge in trained["merges"]],  # type: ignore[misc]
        extra_special_tokens=list(NLLB_LANGUAGES),
    )
    tokenizer.save_pretrained(directory)
    torch.manual_seed(seed)
    config = M2M100Config(
        vocab_size=len(tokenizer),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=256,
        # NLLB's initialisation (0.02) makes a random model's output nearly independent of its
        # input; larger weights make it depend on it.
        init_std=0.3,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    )
    M2M100ForConditionalGeneration(config).eval().save_pretrained(directory)
    return directory


def train_sentencepiece(directory: Path, seed: int, symbols: list[str]) -> Any:
    """A T5-layout sentencepiece tokenizer (<pad> 0, </s> 1, <unk> 2, no <s>), saved."""
    from transformers import AutoTokenizer

    raw = directory / "sentencepiece"
    write_t5_sentencepiece(raw, training_lines(seed), 160, extra_ids=0, symbols=tuple(symbols))
    tokenizer = AutoTokenizer.from_pretrained(raw)
    tokenizer.save_pretrained(directory)
    return tokenizer


def t5_sizes(tokenizer: Any) -> dict[str, Any]:
    return dict(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        initializer_factor=3.0,
    )


def build_madlad(directory: Path, seed: int = 0) -> Path:
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    tokenizer = train_sentencepiece(directory, seed, [f"<2{code}>" for code in MADLAD_LANGUAGES])
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(T5Config(**t5_sizes(tokenizer)))
    model.eval().save_pretrained(directory)
    return directory


def build_aya(directory: Path, seed: int = 0) -> Path:
    import torch
    from transformers import MT5Config, MT5ForConditionalGeneration

    tokenizer = train_sentencepiece(directory, seed, [])
    torch.manual_seed(seed)
    config = MT5Config(
        feed_forward_proj="gated-gelu", tie_word_embeddings=False, **t5_sizes(tokenizer)
    )
    MT5ForConditionalGeneration(config).eval().save_pretrained(directory)
    return directory
