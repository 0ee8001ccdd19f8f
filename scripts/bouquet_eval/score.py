"""Scoring translations: every requested metric per sentence, resumable per direction."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import pandas as pd

from bouquet_eval.data import Direction
from bouquet_eval.io import file_sha256, read_jsonl, write_parquet
from bouquet_eval.metrics import Metric, add_composite, is_statistics_column
from bouquet_eval.provenance import ResumableOutput

log = logging.getLogger(__name__)


def score_directions(
    directions: Sequence[Direction], model_dir: Path, metrics: Sequence[Metric]
) -> None:
    """Write `<model_dir>/<src>-<tgt>.scored.parquet` for every direction not up to date.

    A metric loads its model on its first use, so a job with nothing to do loads nothing.
    """
    signatures = {metric.name: metric.signature() for metric in metrics}
    total = len(directions)
    for position, direction in enumerate(directions, start=1):
        translations = model_dir / f"{direction}.jsonl"
        output = ResumableOutput(
            model_dir / f"{direction}.scored.parquet",
            {"metrics": signatures, "translations_sha256": file_sha256(translations)},
        )
        progress = f"[{position}/{total}] {direction}"
        if output.is_current():
            log.info("%s: up to date", progress)
            continue
        if output.restore_from_cache():
            log.info("%s: restored from %s", progress, output.cached)
            continue
        started = time.monotonic()
        scored = score_rows(load_translations(translations, direction), metrics)
        output.publish(partial(write_parquet, frame=scored))
        log.info(
            "%s: %d sentences scored in %.2f s", progress, len(scored), time.monotonic() - started
        )


def load_translations(path: Path, direction: Direction) -> pd.DataFrame:
    """Read a direction's translations, checking that every row belongs to it."""
    frame = read_jsonl(path)
    for column, expected in (("src_lang", direction.src_lang), ("tgt_lang", direction.tgt_lang)):
        wrong = frame.index[frame[column] != expected]
        if len(wrong):
            raise ValueError(
                f"{path}, line {int(wrong[0]) + 1}: {column} is '{frame.at[wrong[0], column]}', "
                f"expected '{expected}' from the file name"
            )
    not_text = frame.index[~frame["mt_text"].map(lambda text: isinstance(text, str))]
    if len(not_text):
        raise ValueError(f"{path}, line {int(not_text[0]) + 1}: mt_text is not a string")
    return frame


def score_rows(rows: pd.DataFrame, metrics: Sequence[Metric]) -> pd.DataFrame:
    """`rows` with every metric's columns, then the statistics of the corpus metrics."""
    added = {
        column: list(values) for metric in metrics for column, values in metric.score(rows).items()
    }
    scores = {name: values for name, values in added.items() if not is_statistics_column(name)}
    statistics = {name: values for name, values in added.items() if is_statistics_column(name)}
    scored = rows.assign(**scores)
    add_composite(scored)
    return scored.assign(**statistics)
