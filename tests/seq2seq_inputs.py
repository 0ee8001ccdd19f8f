"""The NLLB, MADLAD and Aya translators on tiny checkpoints, and inputs for them, shared by
their tests and the CUDA benchmark."""

from __future__ import annotations

import random
from pathlib import Path

from bouquet_eval.translators.hf_seq2seq import (
    AyaTranslator,
    MadladTranslator,
    NLLBTranslator,
    Seq2SeqTranslator,
    madlad_prompt,
    nllb_prompt,
)
from bouquet_eval.translators.prompt import build_prompt

from .tiny_seq2seq import pseudo_sentence

MAX_NEW_TOKENS = 6


def texts(count: int, seed: int = 1) -> list[str]:
    """Sentences of very different lengths, in no particular order."""
    rng = random.Random(seed)
    return [pseudo_sentence(rng, rng.randint(1, 14)) for _ in range(count)]


TRANSLATORS: dict[str, type[Seq2SeqTranslator]] = {
    "nllb": NLLBTranslator,
    "madlad": MadladTranslator,
    "aya": AyaTranslator,
}


def make(family: str, checkpoint: Path, **settings) -> Seq2SeqTranslator:
    defaults = dict(device="cpu", batch_size=3, max_new_tokens=MAX_NEW_TOKENS)
    return TRANSLATORS[family](model=str(checkpoint), **{**defaults, **settings})


def four_directions(family: str) -> list[list[str]]:
    """Four directions of four sentences; NLLB's go into two languages, two each."""
    sentences = texts(16, seed=7)
    if family == "nllb":
        pairs = [("eng_Latn", "fra_Latn"), ("deu_Latn", "cmn_Hant"), ("ekk_Latn", "fra_Latn")]
        pairs.append(("fra_Latn", "cmn_Hant"))
        prompt = nllb_prompt
    elif family == "madlad":
        pairs = [
            ("eng_Latn", target) for target in ("fra_Latn", "cmn_Hant", "ekk_Latn", "deu_Latn")
        ]
        prompt = madlad_prompt
    else:
        pairs = [
            ("eng_Latn", target) for target in ("fra_Latn", "cmn_Hant", "ekk_Latn", "deu_Latn")
        ]
        prompt = build_prompt
    return [
        [prompt(src, tgt, text) for text in sentences[4 * n : 4 * n + 4]]
        for n, (src, tgt) in enumerate(pairs)
    ]
