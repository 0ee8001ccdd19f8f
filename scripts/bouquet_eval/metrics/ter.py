"""TER (translation edit rate) as sacreBLEU computes it, with sacreBLEU's defaults written out.

Tercom tokenization without normalization, case-insensitive, punctuation kept, no special
treatment of Asian scripts: `nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no`.
"""

from __future__ import annotations

from sacrebleu.metrics import TER as SacreTER

from bouquet_eval.metrics.sacrebleu_metric import SacreBLEUMetric


class TER(SacreBLEUMetric):
    """Column `ter`: edits per reference word, x 100; lower is better, and it can exceed 100.
    Its 2 statistics are the number of edits and the reference length in words."""

    def __init__(self) -> None:
        super().__init__(
            "ter",
            "ter",
            SacreTER(normalized=False, no_punct=False, asian_support=False, case_sensitive=False),
        )
