"""Sentence-level metrics behind one small interface.

A metric is cheap to construct (its signature is known at once) and loads any model lazily,
on its first `score` call, so a scoring job that finds everything up to date loads nothing.

A metric with a corpus-level score (`CorpusMetric`: chrF++, BLEU, TER) also writes each
sentence's sufficient statistics into the scored rows, in columns named by
`statistics_columns`; aggregation sums them per direction instead of re-reading every text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from bouquet_eval.core.config import ConfigError, import_object


@runtime_checkable
class Metric(Protocol):
    """A sentence-level metric.

    Two optional attributes tell how its columns read: `lower_is_better` (the columns where a
    lower score is better, such as MetricX's error score) and `label_columns` (columns that
    hold labels rather than scores, such as GlotLID's predicted language).
    """

    name: str
    columns: tuple[str, ...]
    """The per-sentence columns it adds to the scored rows."""

    def signature(self) -> str:
        """Everything that decides its scores, in one line (sacreBLEU style)."""
        ...

    def score(self, rows: pd.DataFrame) -> dict[str, Sequence[Any]]:
        """Scores for rows with src_lang, tgt_lang, src_text, ref_text and mt_text.

        One entry per column of `columns`, and for a `CorpusMetric` one per statistics column.
        """
        ...


@runtime_checkable
class CorpusMetric(Metric, Protocol):
    """A metric whose corpus score is computed from per-sentence statistics summed over a corpus.

    Its `score` returns, besides its `columns`, one column per statistic
    (`statistics_columns`); `corpus_score` of the column sums is the corpus-level score that
    `scores.csv` reports as `<corpus_column>_corpus`.
    """

    corpus_column: str
    statistics_columns: tuple[str, ...]

    def statistics(self, rows: pd.DataFrame) -> list[list[float]]:
        """Per row of `rows` (mt_text, ref_text): its sufficient statistics."""
        ...

    def corpus_score(self, totals: Sequence[float]) -> float:
        """The corpus-level score from statistics summed over the corpus's sentences."""
        ...


STATISTICS_PREFIX = "stat:"
"""Scored-row columns that start with this hold sufficient statistics, not scores: they are
summed per direction, never averaged, and are not part of scores.csv, summary.csv or
scored_rows.parquet. `stat:<score column>:<i>` is statistic i of that column's metric."""


def statistics_columns(score_column: str, count: int) -> tuple[str, ...]:
    return tuple(f"{STATISTICS_PREFIX}{score_column}:{index}" for index in range(count))


def is_statistics_column(name: str) -> bool:
    return name.startswith(STATISTICS_PREFIX)


METRICS = {
    "chrf": "bouquet_eval.metrics.chrf:ChrF",
    "metricx": "bouquet_eval.metrics.metricx:MetricX",
    "glotlid": "bouquet_eval.metrics.glotlid:GlotLID",
    "bleu": "bouquet_eval.metrics.bleu:BLEU",
    "ter": "bouquet_eval.metrics.ter:TER",
}

COMPOSITE = "glotlid_x_metricx"
"""glotlid_score * (1 - sqrt(metricx / 25)): in [0, 1], 1 for the right language and no error."""


REQUIRED_MEMBERS = (
    *Metric.__annotations__,
    *(name for name, member in vars(Metric).items() if callable(member) and name[0] != "_"),
)
"""What every metric has: the `Metric` protocol's attributes and methods (name, columns,
signature, score). Checked when a metric is loaded, so that a metric of one's own that lacks
one fails while the run is planned, not after translating."""


def load_metric(name: str, settings: dict[str, Any] | None = None) -> Metric:
    """A built-in metric by name, or a metric of one's own as "package.module:Name"."""
    metric = import_object(METRICS.get(name, name))(**(settings or {}))
    missing = [member for member in REQUIRED_MEMBERS if not hasattr(metric, member)]
    if missing:
        raise ConfigError(
            f"metric {name!r}: {type(metric).__name__} has no {', '.join(missing)}; a metric "
            "needs `name`, `columns` (the per-sentence columns it adds), `signature()` and "
            "`score(rows)` (see bouquet_eval.metrics.Metric)"
        )
    return metric


def load_metrics(names: Sequence[str], config: dict[str, Any]) -> list[Metric]:
    """The named metrics, each with its settings from the configuration section of its name."""
    return [load_metric(name, config.get(name)) for name in names]


def corpus_metrics(metrics: Sequence[Metric]) -> list[CorpusMetric]:
    """The metrics that have a corpus-level score as well."""
    return [metric for metric in metrics if isinstance(metric, CorpusMetric)]


def metric_columns(metrics: Sequence[Metric]) -> list[str]:
    columns = [column for metric in metrics for column in metric.columns]
    if {"metricx", "glotlid_score"} <= set(columns):
        columns.append(COMPOSITE)
    return columns


def add_composite(scored: pd.DataFrame) -> None:
    """Add the composite column in place when both of its metrics are there."""
    if {"metricx", "glotlid_score"} <= set(scored.columns):
        scored[COMPOSITE] = scored["glotlid_score"] * (1 - np.sqrt(scored["metricx"] / 25))
