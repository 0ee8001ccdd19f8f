"""chrF++: sacreBLEU's character n-gram F-score with word bigrams (word_order=2)."""

from __future__ import annotations

from sacrebleu.metrics import CHRF

from bouquet_eval.metrics.sacrebleu_metric import SacreBLEUMetric


class ChrF(SacreBLEUMetric):
    """Column `chrfpp`; its 24 statistics are, for character orders 1-6 then word orders 1-2,
    the hypothesis, reference and matching n-gram counts."""

    def __init__(self) -> None:
        super().__init__("chrf", "chrfpp", CHRF(word_order=2))
