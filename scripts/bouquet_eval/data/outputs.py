"""The workflow's per-direction outputs and what each is made from.

The planner (bouquet_eval.core.freshness, at every run) and the jobs that write the outputs build
them here, so both decide currency with the same settings and inputs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bouquet_eval.core.freshness import ResumableOutput
from bouquet_eval.data.dataset import Direction

TRANSLATIONS_SUFFIX = ".jsonl"
SCORED_SUFFIX = ".scored.parquet"
METRIC_SCORES_DIR = "by-metric"
"""Under a model's folder: `<metric>/<direction>.parquet`, one metric's columns of a direction,
which its score job writes and the direction's scored file gathers."""


def translation_path(model_dir: Path, direction: Direction) -> Path:
    return model_dir / f"{direction}{TRANSLATIONS_SUFFIX}"


def scored_path(model_dir: Path, direction: Direction) -> Path:
    return model_dir / f"{direction}{SCORED_SUFFIX}"


def metric_folder_name(metric: str) -> str:
    """A metric's folder under METRIC_SCORES_DIR: its name (`pkg.mod:Name` -> `pkg.mod-Name`)."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", metric)


def metric_scores_path(model_dir: Path, metric: str, direction: Direction) -> Path:
    return model_dir / METRIC_SCORES_DIR / metric_folder_name(metric) / f"{direction}.parquet"


def direction_of(path: str | Path) -> Direction:
    """The direction a per-direction output or input file is named after."""
    name = Path(path).name
    for suffix in (SCORED_SUFFIX, TRANSLATIONS_SUFFIX, ".parquet"):
        if name.endswith(suffix):
            return Direction.parse(name.removesuffix(suffix))
    raise ValueError(f"{path} is not named after a direction")


def translation_output(
    model_dir: Path,
    direction: Direction,
    settings: Mapping[str, Any],
    dataset_file: Path,
    provided: Path | None = None,
) -> ResumableOutput:
    """`<model_dir>/<direction>.jsonl`, made from the dataset's file of the direction and, for
    translations brought by the user, their file."""
    inputs = {"dataset": dataset_file}
    if provided is not None:
        inputs["provided"] = provided
    return ResumableOutput(translation_path(model_dir, direction), settings, inputs)


def written_by_translate_job(model_dir: Path, direction: Direction, dataset_file: Path) -> bool:
    """Whether the direction's translations are what a translate job wrote from this dataset
    file: such a job writes only lines it checked against the file's sentences (a `provided`
    model's, line by line), so that scoring them need not check them again."""
    return ResumableOutput(
        translation_path(model_dir, direction), {}, {"dataset": dataset_file}
    ).holds_what_was_written()


def metric_scores_output(
    model_dir: Path,
    metric: str,
    direction: Direction,
    config: Mapping[str, Any],
    dataset_file: Path,
) -> ResumableOutput:
    """One metric's columns of a direction (`metric_scores_path`), made from the translations,
    which are checked against the dataset's file before they are scored, with the metric's
    configuration section."""
    inputs = {"translations": translation_path(model_dir, direction), "dataset": dataset_file}
    settings = score_settings([metric], config)
    return ResumableOutput(metric_scores_path(model_dir, metric, direction), settings, inputs)


def scored_output(
    model_dir: Path,
    direction: Direction,
    settings: Mapping[str, Any],
    dataset_file: Path,
) -> ResumableOutput:
    """`<model_dir>/<direction>.scored.parquet`: the translations, checked against the
    dataset's file, with the columns of every metric (`metric_scores_path`) beside them; no
    cached copy, since gathering them again costs less than copying one."""
    inputs = {"translations": translation_path(model_dir, direction), "dataset": dataset_file}
    for metric in settings["metrics"]:
        inputs[f"metric:{metric}"] = metric_scores_path(model_dir, metric, direction)
    return ResumableOutput(scored_path(model_dir, direction), settings, inputs, cached_copy=False)


def score_settings(metrics: Sequence[str], config: Mapping[str, Any]) -> dict[str, Any]:
    """What decides a direction's scores: the metrics and their configuration sections.

    Versions and devices, which a metric's signature adds, are known only where the job runs;
    the job records them and rescores when they differ (bouquet_eval.scoring.score).
    """
    return {"metrics": list(metrics), "settings": {name: config.get(name) for name in metrics}}


EXTRACT_FILE = "report_extract.parquet"
"""What the report takes of a model's sentences (`results.extracts`)."""
AGGREGATES = (
    "scores.csv",
    "summary.csv",
    "timing.csv",
    "scored_rows.parquet",
    "resampled.npz",
    EXTRACT_FILE,
)
"""A model's aggregates, made from every scored direction (its manifest is a history)."""


def aggregate_outputs(
    model_dir: Path,
    directions: Sequence[Direction],
    config: Mapping[str, Any],
) -> list[ResumableOutput]:
    settings = {**score_settings(config["metrics"], config), "statistics": config["statistics"]}
    inputs = {direction.name: scored_path(model_dir, direction) for direction in directions}
    return [ResumableOutput(model_dir / name, settings, inputs) for name in AGGREGATES]
