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

import pandas as pd

from bouquet_eval.core.config import ConfigError, import_object


@runtime_checkable
class Metric(Protocol):
    """A sentence-level metric.

    How its columns read, the job it runs in and the rest are the facts of its record
    (`bouquet_eval.metrics.records`); a metric of one's own may declare them as attributes of
    the same names (`lower_is_better`, `label_columns`, `environment`, `gpus`, `cpus`, ...).
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


def builtin_factory(name: str) -> str:
    """ "package.module:Name" of a built-in metric, or `name` itself for a metric of one's own."""
    from bouquet_eval.metrics.records import RECORDS

    return RECORDS[name].factory if name in RECORDS else name


REQUIRED_MEMBERS = (
    *Metric.__annotations__,
    *(name for name, member in vars(Metric).items() if callable(member) and name[0] != "_"),
)
"""What every metric has: the `Metric` protocol's attributes and methods (name, columns,
signature, score). Checked when a metric is loaded, so that a metric of one's own that lacks
one fails while the run is planned, not after translating."""


def load_metric(name: str, settings: dict[str, Any] | None = None) -> Metric:
    """A built-in metric by name, or a metric of one's own as "package.module:Name"."""
    metric = import_object(builtin_factory(name))(**(settings or {}))
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
    """The metrics' per-sentence columns, then those of the composites they make up."""
    from bouquet_eval.metrics.records import COMPOSITES

    columns = [column for metric in metrics for column in metric.columns]
    names = [metric.name for metric in metrics]
    return columns + [c.column for c in COMPOSITES.values() if c.applies(names)]


def add_composites(scored: pd.DataFrame, metrics: Sequence[str]) -> None:
    """Add, in place, the column of every composite whose metrics are all in `metrics`."""
    from bouquet_eval.metrics.records import COMPOSITES

    for composite in COMPOSITES.values():
        if composite.applies(metrics):
            scored[composite.column] = composite.combine(scored)
