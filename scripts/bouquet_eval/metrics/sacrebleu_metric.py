"""sacreBLEU metrics scored from their sufficient statistics, extracted once per sentence.

sacreBLEU reduces every sentence to a short list of counts (n-gram matches, lengths, edits).
A sentence's score is computed from its own counts, exactly as `sentence_score` does, and a
corpus score from the counts summed over the corpus, exactly as `corpus_score` does. The counts
are written beside the scores, so aggregation sums them instead of re-reading every text.

The statistics are sacreBLEU's own, through its internal `_extract_corpus_statistics` and
`_compute_score_from_stats` (what its significance tests use); sacreBLEU is pinned, and the
tests check every score against its public `sentence_score` and `corpus_score`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from sacrebleu.metrics.base import Metric as SacreBLEUBase

from bouquet_eval.metrics import statistics_columns


class SacreBLEUMetric:
    """A corpus metric (`bouquet_eval.metrics.CorpusMetric`) on top of a sacreBLEU metric.

    `corpus` computes the corpus score when it must differ from `sentence` in something that
    only changes how summed statistics become a score (BLEU's effective order).
    """

    name: str
    columns: tuple[str, ...]
    corpus_column: str
    statistics_columns: tuple[str, ...]

    def __init__(
        self,
        name: str,
        column: str,
        sentence: SacreBLEUBase,
        corpus: SacreBLEUBase | None = None,
    ) -> None:
        self.name = name
        self.columns = (column,)
        self.corpus_column = column
        self._sentence = sentence
        self._corpus = corpus or sentence
        # sacreBLEU learns the number of references from a first evaluation, and its
        # signature shows it: we always use one. The probe also tells how many statistics.
        (probe,) = self._sentence._extract_corpus_statistics(["x"], [["x"]])
        self._corpus._extract_corpus_statistics(["x"], [["x"]])
        self.statistics_columns = statistics_columns(column, len(probe))

    def signature(self) -> str:
        sentence = str(self._sentence.get_signature())
        corpus = str(self._corpus.get_signature())
        return sentence if sentence == corpus else f"sentence {sentence}; corpus {corpus}"

    def statistics(self, rows: pd.DataFrame) -> list[list[Any]]:
        # Sentence by sentence, as `sentence_score` extracts them. Given the whole list,
        # sacreBLEU first builds the n-grams of every reference and keeps them all until the
        # end, which costs about a quarter more CPU time than extracting and dropping them one
        # sentence at a time (the statistics are the same). Per sentence, the steps of its
        # `_extract_corpus_statistics` for one hypothesis and one reference, without the lists
        # and checks around them that a corpus of several references needs.
        metric = self._sentence
        preprocess = metric._preprocess_segment
        reference_info = metric._extract_reference_info
        segment_statistics = metric._compute_segment_statistics
        pairs = zip(rows["mt_text"].tolist(), rows["ref_text"].tolist(), strict=True)
        return [
            segment_statistics(preprocess(hypothesis), reference_info([preprocess(reference)]))
            for hypothesis, reference in pairs
        ]

    def score(self, rows: pd.DataFrame) -> dict[str, Sequence[Any]]:
        statistics = self.statistics(rows)
        scores = [self._sentence._compute_score_from_stats(counts).score for counts in statistics]
        by_column = {
            column: [counts[index] for counts in statistics]
            for index, column in enumerate(self.statistics_columns)
        }
        return {self.corpus_column: scores, **by_column}

    def corpus_score(self, totals: Sequence[float]) -> float:
        return float(self._corpus._compute_score_from_stats(list(totals)).score)
