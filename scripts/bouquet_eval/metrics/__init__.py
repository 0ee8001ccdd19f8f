"""Sentence-level metrics behind one small interface.

A metric is cheap to construct (its signature is known at once) and loads any model lazily,
on its first `score` call, so a scoring job that finds everything up to date loads nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from bouquet_eval.translators import import_object


@runtime_checkable
class Metric(Protocol):
    name: str
    columns: tuple[str, ...]
    """The per-sentence columns it adds to the scored rows."""

    def signature(self) -> str:
        """Everything that decides its scores, in one line (sacreBLEU style)."""
        ...

    def score(self, rows: pd.DataFrame) -> dict[str, Sequence[Any]]:
        """Scores for rows with src_lang, tgt_lang, src_text, ref_text and mt_text."""
        ...


METRICS = {
    "chrf": "bouquet_eval.metrics.chrf:ChrF",
    "metricx": "bouquet_eval.metrics.metricx:MetricX",
    "glotlid": "bouquet_eval.metrics.glotlid:GlotLID",
}

COMPOSITE = "glotlid_x_metricx"
"""glotlid_score * (1 - sqrt(metricx / 25)): in [0, 1], 1 for the right language and no error."""


def load_metric(name: str, settings: dict[str, Any] | None = None) -> Metric:
    """A built-in metric by name, or a metric of one's own as "package.module:Name"."""
    return import_object(METRICS.get(name, name))(**(settings or {}))


def load_metrics(names: Sequence[str], config: dict[str, Any]) -> list[Metric]:
    """The named metrics, each with its settings from the configuration section of its name."""
    return [load_metric(name, config.get(name)) for name in names]


def metric_columns(metrics: Sequence[Metric]) -> list[str]:
    columns = [column for metric in metrics for column in metric.columns]
    if {"metricx", "glotlid_score"} <= set(columns):
        columns.append(COMPOSITE)
    return columns


def add_composite(scored: pd.DataFrame) -> None:
    """Add the composite column in place when both of its metrics are there."""
    if {"metricx", "glotlid_score"} <= set(scored.columns):
        scored[COMPOSITE] = scored["glotlid_score"] * (1 - np.sqrt(scored["metricx"] / 25))
