"""Judged translations as the score jobs take them, and their scores read back.

Each judged system is a model whose translations are given: for each of its directions,
`<system folder>/<src>-<tgt>.jsonl` holds its judged translations and
`<system folder>/dataset/<src>-<tgt>.parquet` their sources, references and segment ids (the
dataset's columns), so that the workflow's own score jobs score them as any model's, resumably
and with one model load per job. Rows keep the table's order within a direction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from bouquet_eval.data import Direction
from bouquet_eval.io import write_jsonl, write_parquet
from bouquet_eval.leaderboard import lower_is_better_columns, score_columns
from bouquet_eval.metrics import load_metrics
from bouquet_eval.outputs import scored_path, translation_path


def dataset_file(folder: Path, direction: Direction) -> Path:
    return folder / "dataset" / f"{direction}.parquet"


def write_system_inputs(table: pd.DataFrame, system: str, folder: Path) -> list[Path]:
    """Write one system's per-direction translations and sentences; the paths written."""
    written = []
    rows = table[table["system"] == system]
    for (src, tgt), part in rows.groupby(["src_lang", "tgt_lang"], sort=True):
        direction = Direction(str(src), str(tgt))
        sentences = pd.DataFrame(
            {
                "src_lang": part["src_lang"].to_numpy(),
                "tgt_lang": part["tgt_lang"].to_numpy(),
                "src_text": part["src_text"].to_numpy(),
                "tgt_text": part["ref_text"].to_numpy(),
                "uniq_id": part["segment"].to_numpy(),
            }
        )
        translations = sentences.rename(columns={"tgt_text": "ref_text"}).assign(
            mt_text=part["mt_text"].to_numpy()
        )
        for path, write, frame in (
            (dataset_file(folder, direction), write_parquet, sentences),
            (translation_path(folder, direction), write_jsonl, translations),
        ):
            path.parent.mkdir(parents=True, exist_ok=True)
            write(path, frame)
            written.append(path)
    return written


def metric_scores(
    table: pd.DataFrame,
    folders: Mapping[str, Path],
    columns: Sequence[str],
) -> dict[str, np.ndarray]:
    """Per score column, the score of every row of `table` (NaN where a metric gave none),
    read from the systems' scored files."""
    keys = ["system", "src_lang", "tgt_lang", "segment"]
    parts = []
    for system, rows in table.groupby("system", sort=True):
        for (src, tgt), _ in rows.groupby(["src_lang", "tgt_lang"], sort=True):
            path = scored_path(folders[str(system)], Direction(str(src), str(tgt)))
            available = pq.read_schema(path).names
            scored = pd.read_parquet(
                path, columns=["uniq_id", *[c for c in columns if c in available]]
            )
            parts.append(
                scored.rename(columns={"uniq_id": "segment"}).assign(
                    system=system,
                    src_lang=src,
                    tgt_lang=tgt,
                    segment=lambda f: f["segment"].astype(str),
                )
            )
    scores = pd.concat(parts, ignore_index=True)
    joined = table[keys].merge(scores, on=keys, how="left", validate="one_to_one")
    return {
        column: pd.to_numeric(joined[column], errors="coerce").to_numpy(float)
        if column in joined
        else np.full(len(table), np.nan)
        for column in columns
    }


def scored_columns(
    metric_names: Sequence[str], config: Mapping[str, object]
) -> tuple[list[str], frozenset[str]]:
    """The configured metrics' score columns, and those where lower is better: the one place
    where meta-evaluation reads the metric registry."""
    metrics = load_metrics(metric_names, dict(config))
    return score_columns(metrics), lower_is_better_columns(metrics)
