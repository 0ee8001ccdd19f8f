"""chrF++ as sacreBLEU computes it (bouquet_eval.metrics.chrf)."""

from __future__ import annotations

import pandas as pd
from sacrebleu.metrics import CHRF

from bouquet_eval.metrics import load_metric


def test_chrf_metric_is_sacrebleu_chrf_plus_plus() -> None:
    metric = load_metric("chrf")
    rows = pd.DataFrame(
        {"mt_text": ["Le chat dort.", "", "x"], "ref_text": ["Le chat dort !", "a", "x"]}
    )
    reference = CHRF(word_order=2)
    assert metric.score(rows)["chrfpp"] == [
        reference.sentence_score(h, [r]).score
        for h, r in zip(rows["mt_text"], rows["ref_text"], strict=True)
    ]
    assert metric.signature() == "nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.6.0"
