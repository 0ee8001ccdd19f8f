"""Sentence-level metrics behind one small interface.

A metric is cheap to construct (its signature is known at once) and loads any model lazily,
on its first `score` call, so a scoring job that finds everything up to date loads nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

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
}


def load_metric(name: str, settings: dict[str, Any] | None = None) -> Metric:
    return import_object(METRICS[name])(**(settings or {}))
