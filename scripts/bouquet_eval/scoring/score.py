"""Scoring translations: every requested metric per sentence, resumable per direction."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from bouquet_eval.core.freshness import ResumableOutput, remove_stray_temporaries
from bouquet_eval.core.io import write_table
from bouquet_eval.data.dataset import DatasetSource, Direction
from bouquet_eval.data.outputs import scored_output, translation_path
from bouquet_eval.data.translations import read_translations
from bouquet_eval.metrics import Metric, add_composite, is_statistics_column

log = logging.getLogger(__name__)


def score_directions(
    directions: Sequence[Direction],
    model_dir: Path,
    metrics: Sequence[Metric],
    dataset: DatasetSource,
    settings: Mapping[str, Any] | None = None,
    limit: int | None = None,
    environment: Mapping[str, Any] | None = None,
) -> None:
    """Write `<model_dir>/<src>-<tgt>.scored.parquet` for every direction not current.

    `settings` (see `outputs.score_settings`; by default the metrics' names) decide the scores
    with the translations and the dataset; the metrics' signatures, which add the versions and
    devices of this job, are recorded too, and a direction scored under other signatures is
    scored again. Translations
    are checked line by line against the dataset before they are scored. A metric loads its
    model on its first use, so a job with nothing to do loads nothing.
    """
    signatures = {metric.name: metric.signature() for metric in metrics}
    settings = {"metrics": list(signatures)} if settings is None else settings
    recorded_environment = {**(environment or {}), "metrics": signatures}
    outputs = {
        direction: replace(
            scored_output(model_dir, direction, settings, dataset.file(direction)),
            cache_variant=signatures,
        )
        for direction in directions
    }
    remove_stray_temporaries(outputs.values())
    total = len(directions)
    for position, (direction, output) in enumerate(outputs.items(), start=1):
        progress = f"[{position}/{total}] {direction}"
        if output.is_current() and _scored_with(output, signatures):
            log.info("%s: up to date", progress)
            continue
        if output.restore_from_cache(recorded_environment):
            log.info("%s: restored from %s", progress, output.cached)
            continue
        started = time.monotonic()
        translations = read_translations(
            translation_path(model_dir, direction), direction, dataset.load(direction, limit)
        )
        scored = scored_table(translations, metrics)
        output.publish(partial(write_table, table=scored), recorded_environment)
        log.info(
            "%s: %d sentences scored in %.2f s", progress, len(scored), time.monotonic() - started
        )


def _scored_with(output: ResumableOutput, signatures: Mapping[str, str]) -> bool:
    record = output.record() or {}
    return (record.get("environment") or {}).get("metrics") == dict(signatures)


def score_rows(rows: pd.DataFrame, metrics: Sequence[Metric]) -> pd.DataFrame:
    """`rows` with every metric's columns, then the statistics of the corpus metrics."""
    scored, statistics = _with_scores(rows, metrics)
    return scored.assign(**statistics)


def scored_table(rows: pd.DataFrame, metrics: Sequence[Metric]) -> pa.Table:
    """What a direction's scored file holds: the columns of `score_rows`, with the same types.

    The statistics (24 columns for chrF++ alone) go straight into arrow arrays: through pandas
    they cost a few times more than the rest of the file.
    """
    scored, statistics = _with_scores(rows, metrics)
    table = pa.Table.from_pandas(scored, preserve_index=False)
    for name, values in statistics.items():
        table = table.append_column(name, pa.array(values, from_pandas=True))
    return table


def _with_scores(
    rows: pd.DataFrame, metrics: Sequence[Metric]
) -> tuple[pd.DataFrame, dict[str, list[Any]]]:
    """`rows` with every metric's score columns and the composite; apart, the statistics."""
    added = {
        column: list(values) for metric in metrics for column, values in metric.score(rows).items()
    }
    scores = {name: values for name, values in added.items() if not is_statistics_column(name)}
    statistics = {name: values for name, values in added.items() if is_statistics_column(name)}
    scored = rows.assign(**scores)
    add_composite(scored)
    return scored, statistics
