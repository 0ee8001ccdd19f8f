"""BLEU as sacreBLEU computes it, with sacreBLEU's defaults written out.

Tokenizer 13a, case kept, exponential smoothing, n-grams up to 4. A sentence's score uses the
effective order (only the n-gram orders the sentence has), as sacreBLEU's `sentence_bleu`
does and recommends for single sentences; the corpus score does not, as `corpus_bleu`. Both
appear in the signature (`eff:yes` and `eff:no`).

13a splits on spaces and punctuation: for languages written without spaces between words
(Chinese, Japanese, Thai, ...) a sentence is a handful of tokens and BLEU says little.
"""

from __future__ import annotations

from typing import TypedDict

from sacrebleu.metrics import BLEU as SacreBLEU

from bouquet_eval.metrics.sacrebleu_metric import SacreBLEUMetric


class _Settings(TypedDict):
    tokenize: str
    lowercase: bool
    smooth_method: str
    max_ngram_order: int


SETTINGS: _Settings = {
    "tokenize": "13a",
    "lowercase": False,
    "smooth_method": "exp",
    "max_ngram_order": 4,
}


class BLEU(SacreBLEUMetric):
    """Column `bleu` (0-100, higher is better); its 10 statistics are the hypothesis length, the
    reference length, the matching n-grams for n = 1-4, then the hypothesis n-grams for n = 1-4."""

    def __init__(self) -> None:
        super().__init__(
            "bleu",
            "bleu",
            sentence=SacreBLEU(effective_order=True, **SETTINGS),
            corpus=SacreBLEU(effective_order=False, **SETTINGS),
        )
