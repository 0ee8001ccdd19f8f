"""Per-model aggregates: scores.csv, scored_rows.parquet and the append-only manifest.json."""

from __future__ import annotations

import datetime
import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from bouquet_eval.data import Direction
from bouquet_eval.io import write_atomically, write_json, write_parquet
from bouquet_eval.provenance import COMMAND_ENVIRONMENT_VARIABLE

GROUP_COLUMNS = ["src_lang", "tgt_lang"]


def collect_scored_rows(paths: Sequence[Path]) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(path) for path in paths], ignore_index=True)


def direction_scores(rows: pd.DataFrame, metric_columns: Sequence[str]) -> pd.DataFrame:
    """One row per direction: the number of sentences and the mean of each metric (NaN skipped)."""
    grouped = rows.groupby(GROUP_COLUMNS, sort=True)
    scores = grouped.size().rename("n_sentences").to_frame()
    scores = scores.join(grouped[list(metric_columns)].mean())
    return scores.reset_index()


def write_aggregates(
    scored_paths: Sequence[Path],
    metric_columns: Sequence[str],
    scores_csv: Path,
    scored_rows_parquet: Path,
) -> pd.DataFrame:
    rows = collect_scored_rows(scored_paths)
    scores = direction_scores(rows, metric_columns)
    write_atomically(scores_csv, lambda path: scores.to_csv(path, index=False))
    write_parquet(scored_rows_parquet, rows)
    return scores


def manifest_entry(
    config: dict[str, Any],
    model_settings: dict[str, Any],
    model_name: str,
    dataset_identity: dict[str, Any],
    directions: Sequence[Direction],
    metric_signatures: dict[str, str],
) -> dict[str, Any]:
    """What produced the outputs; `config` and `model_settings` must already be redacted."""
    from importlib.metadata import version

    command = os.environ.get(COMMAND_ENVIRONMENT_VARIABLE)
    return {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "bouquet_eval_version": version("bouquet-eval"),
        "snakemake_version": version("snakemake"),
        "python_version": platform.python_version(),
        "command": json.loads(command) if command else None,
        "model": {"name": model_name, **model_settings},
        "dataset": dataset_identity,
        "limit": config.get("limit"),
        "config": config,
        "n_directions": len(directions),
        "directions": [direction.name for direction in directions],
        "metrics": metric_signatures,
    }


def append_manifest(path: Path, entry: dict[str, Any]) -> None:
    """Add `entry` to the manifest's history; earlier entries are kept as they are."""
    history = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"entries": []}
    history["entries"].append(entry)
    write_json(path, history)
