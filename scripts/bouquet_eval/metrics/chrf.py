"""chrF++: sacreBLEU's character n-gram F-score with word bigrams (word_order=2)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from sacrebleu.metrics import CHRF


class ChrF:
    name = "chrf"
    columns = ("chrfpp",)

    def __init__(self) -> None:
        self._chrf = CHRF(word_order=2)

    def signature(self) -> str:
        # sacreBLEU learns the number of references from a first evaluation; we always use one.
        probe = CHRF(word_order=2)
        probe.corpus_score(["x"], [["x"]])
        return str(probe.get_signature())

    def score(self, rows: pd.DataFrame) -> dict[str, Sequence[float]]:
        scores = [
            self._chrf.sentence_score(hypothesis, [reference]).score
            for hypothesis, reference in zip(rows["mt_text"], rows["ref_text"], strict=True)
        ]
        return {"chrfpp": scores}
