"""Per-model aggregates: scores.csv, summary.csv, scored_rows.parquet and manifest.json."""

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
from bouquet_eval.provenance import COMMAND_ENVIRONMENT_VARIABLE, ResumableOutput
from bouquet_eval.stats import Resampling, bootstrap_interval
from bouquet_eval.translate import TIMING_DIR
from bouquet_eval.version import package_version

GROUP_COLUMNS = ["src_lang", "tgt_lang"]
ENGLISH = "eng_Latn"


def collect_scored_rows(paths: Sequence[Path]) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(path) for path in paths], ignore_index=True)


def numeric_columns(rows: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns that can be averaged (GlotLID's predicted label, for one, cannot)."""
    return [c for c in columns if c in rows and pd.api.types.is_numeric_dtype(rows[c])]


def direction_scores(
    rows: pd.DataFrame, metric_columns: Sequence[str], resampling: Resampling
) -> pd.DataFrame:
    """One row per direction: sentences, and per metric its mean with a 95% bootstrap interval.

    Means skip missing values (NaN). With chrF++, its corpus-level score is added too.
    """
    columns = numeric_columns(rows, metric_columns)
    records = []
    for (src_lang, tgt_lang), group in rows.groupby(GROUP_COLUMNS, sort=True):
        record: dict[str, Any] = {
            "src_lang": src_lang,
            "tgt_lang": tgt_lang,
            "n_sentences": len(group),
        }
        for column in columns:
            low, high = bootstrap_interval(group[column].to_numpy(), resampling)
            record[column] = group[column].mean()
            record[f"{column}_ci_low"] = low
            record[f"{column}_ci_high"] = high
        if "chrfpp" in columns:
            record["chrfpp_corpus"] = corpus_chrf(group)
        records.append(record)
    return pd.DataFrame.from_records(records)


def corpus_chrf(rows: pd.DataFrame) -> float:
    from sacrebleu.metrics import CHRF

    return (
        CHRF(word_order=2).corpus_score(rows["mt_text"].tolist(), [rows["ref_text"].tolist()]).score
    )


def summary(scores: pd.DataFrame) -> pd.DataFrame:
    """Macro averages over directions: overall, by source, by target, and relative to English."""
    columns = [
        c
        for c in scores.columns
        if c not in (*GROUP_COLUMNS, "n_sentences") and not c.endswith(("_ci_low", "_ci_high"))
    ]
    into_english = scores["tgt_lang"] == ENGLISH
    out_of_english = scores["src_lang"] == ENGLISH
    groups: list[tuple[str, str, pd.DataFrame]] = [("all", "all", scores)]
    groups += [("src_lang", str(code), part) for code, part in scores.groupby("src_lang")]
    groups += [("tgt_lang", str(code), part) for code, part in scores.groupby("tgt_lang")]
    groups += [
        ("english", "into_english", scores[into_english]),
        ("english", "out_of_english", scores[out_of_english]),
        ("english", "without_english", scores[~into_english & ~out_of_english]),
    ]
    records = [
        {"group_by": by, "group": name, "n_directions": len(part), **part[columns].mean().to_dict()}
        for by, name, part in groups
        if len(part)
    ]
    return pd.DataFrame.from_records(records)


def write_aggregates(
    scored_paths: Sequence[Path],
    metric_columns: Sequence[str],
    resampling: Resampling,
    outputs: dict[str, Path],
) -> pd.DataFrame:
    """Write `scores` (csv), `summary` (csv) and `scored_rows` (parquet) from scored files."""
    rows = collect_scored_rows(scored_paths)
    scores = direction_scores(rows, metric_columns, resampling)
    write_csv(outputs["scores"], scores)
    write_csv(outputs["summary"], summary(scores))
    write_parquet(outputs["scored_rows"], rows)
    return scores


def recorded_signatures(scored_paths: Sequence[Path]) -> dict[str, str]:
    """The metric signatures the scoring jobs recorded beside their outputs.

    Read rather than recomputed: a metric's signature can depend on where it ran (MetricX's
    dtype follows the scoring job's GPU), and aggregation runs elsewhere, without the models.
    """
    signatures: dict[str, str] = {}
    for path in scored_paths:
        record = json.loads(ResumableOutput(path, {}).sidecar.read_text(encoding="utf-8"))
        for name, signature in record["settings"]["metrics"].items():
            if signatures.setdefault(name, signature) != signature:
                raise ValueError(
                    f"{path} was scored with {name} '{signature}', other directions with "
                    f"'{signatures[name]}': rerun the scoring of this model"
                )
    return signatures


def timing_table(model_dir: Path, directions: Sequence[Direction]) -> pd.DataFrame:
    """The translation timing of each direction (see translate.timing_record), where recorded."""
    records = []
    for direction in directions:
        path = model_dir / TIMING_DIR / f"{direction}.json"
        if path.is_file():
            records.append(json.loads(path.read_text(encoding="utf-8")))
    timing = pd.DataFrame.from_records(records)
    leading = [c for c in GROUP_COLUMNS if c in timing]
    return timing[leading + [c for c in timing.columns if c not in leading]]


def timing_totals(timing: pd.DataFrame) -> dict[str, Any]:
    """Sums over directions for the manifest: seconds, sentences, requests, tokens, ..."""
    if timing.empty:
        return {"directions": 0}
    additive = [
        c for c in timing.columns if c not in (*GROUP_COLUMNS,) and not c.endswith("_per_second")
    ]
    totals = {c: float(timing[c].sum()) for c in additive}
    return {"directions": len(timing), **totals}


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    write_atomically(path, lambda temporary: frame.to_csv(temporary, index=False))


def manifest_entry(
    config: dict[str, Any],
    model_settings: dict[str, Any],
    model_name: str,
    dataset_identity: dict[str, Any],
    directions: Sequence[Direction],
    metric_signatures: dict[str, str],
    resampling: Resampling,
    timing: dict[str, Any],
) -> dict[str, Any]:
    """What produced the outputs; `config` and `model_settings` must already be redacted."""
    from importlib.metadata import version

    command = os.environ.get(COMMAND_ENVIRONMENT_VARIABLE)
    return {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "bouquet_eval_version": package_version(),
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
        "statistics": resampling.signature(),
        "timing": timing,
    }


def append_manifest(path: Path, entry: dict[str, Any]) -> None:
    """Add `entry` to the manifest's history; earlier entries are kept as they are."""
    history = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"entries": []}
    history["entries"].append(entry)
    write_json(path, history)
