"""Per-model aggregates: scores.csv, summary.csv, scored_rows.parquet, resampled.npz and
manifest.json.

Each direction's scored file is read once, with pyarrow: its score columns are kept for the
means and bootstrap intervals, the statistics of corpus metrics (see
`bouquet_eval.metrics.CorpusMetric`) are summed into its corpus scores, and its rows go on to
scored_rows.parquet, without those statistics.
"""

from __future__ import annotations

import datetime
import itertools
import json
import logging
import platform
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bouquet_eval.core.freshness import ResumableOutput
from bouquet_eval.core.io import atomic_path, write_atomically, write_json
from bouquet_eval.core.stats import (
    Resampling,
    bootstrap_mean_matrix,
    macro_interval,
    percentile_intervals,
    skipna_mean,
)
from bouquet_eval.core.version import package_version
from bouquet_eval.data.dataset import Direction
from bouquet_eval.metrics import (
    CorpusMetric,
    Metric,
    corpus_metrics,
    is_statistics_column,
    metric_columns,
)
from bouquet_eval.metrics.records import MetricSet
from bouquet_eval.planning.cost import COST
from bouquet_eval.results.resampled import ResampledScores, sentences_digest
from bouquet_eval.translation.translate import TIMING_DIR

log = logging.getLogger(__name__)

GROUP_COLUMNS = ["src_lang", "tgt_lang"]
UNSEEN = "unseen_by"
"""scores.csv's column naming, per direction, the learned metrics whose model was not trained
on its target language (nor, for a reference-free one, its source language), comma-separated;
empty where every model saw them. Present when the run has a learned metric."""
ENGLISH = "eng_Latn"
ENGLISH_GROUPS = ("into_english", "out_of_english", "without_english")
"""Directions by English: into it, out of it, and between two other languages (BOUQuET's
regional pairs, about half its directions)."""
ROW_GROUP_ROWS = 1 << 17
"""Rows per row group of scored_rows.parquet (a direction is about 850)."""


@dataclass(frozen=True)
class DirectionValues:
    """What the aggregates need of one direction."""

    src_lang: str
    tgt_lang: str
    n_sentences: int
    scores: dict[str, np.ndarray]
    """Per score column: the sentence scores, NaN where missing."""
    corpus: dict[str, float]
    """Per corpus metric's column: its corpus-level score."""
    sentences: dict[str, str]
    """Per score column: the `resampled.sentences_digest` of the sentences it scored."""
    recomputed: tuple[str, ...] = ()
    """The corpus metrics whose statistics the file lacked, recomputed from its texts."""


@dataclass(frozen=True)
class DirectionTable:
    """scores.csv, and what its model-level intervals are made from."""

    scores: pd.DataFrame
    """scores.csv: one row per direction, sorted by source then target language."""
    resampled: ResampledScores
    """Per score column: each direction's bootstrap resample means (rows as in `scores`)."""


def english_groups(table: pd.DataFrame) -> dict[str, pd.Series]:
    """Which rows of `table` (its src_lang and tgt_lang) are in each of ENGLISH_GROUPS."""
    into = table["tgt_lang"] == ENGLISH
    out_of = table["src_lang"] == ENGLISH
    return dict(zip(ENGLISH_GROUPS, (into, out_of, ~into & ~out_of), strict=True))


def numeric_columns(rows: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns that can be averaged (GlotLID's predicted label, for one, cannot)."""
    return [c for c in columns if c in rows and pd.api.types.is_numeric_dtype(rows[c])]


def direction_values(
    table: pa.Table, columns: Sequence[str], corpus_metrics: Sequence[CorpusMetric], source: str
) -> DirectionValues:
    """One direction's scores and corpus scores from its rows; `source` names it in errors."""
    corpus: dict[str, float] = {}
    recomputed = []
    for metric in corpus_metrics:
        if set(metric.statistics_columns) <= set(table.column_names):
            totals = [pc.sum(table[column]).as_py() for column in metric.statistics_columns]
        else:  # scored before the statistics were kept: read the texts once more
            rows = table.select(["mt_text", "ref_text"]).to_pandas()
            totals = [sum(column) for column in zip(*metric.statistics(rows), strict=True)]
            recomputed.append(metric.name)
        corpus[metric.corpus_column] = metric.corpus_score(totals)
    # Rows without ids (scores made in memory) are known by their positions.
    uniq_ids = np.asarray(
        table["uniq_id"].to_numpy(zero_copy_only=False)
        if "uniq_id" in table.column_names
        else np.arange(table.num_rows),
        dtype=str,
    )
    return _values(
        _only_value(table, "src_lang", source),
        _only_value(table, "tgt_lang", source),
        {column: _float_values(table, column) for column in columns},
        uniq_ids,
        corpus,
        tuple(recomputed),
    )


def _values(
    src_lang: str,
    tgt_lang: str,
    scores: dict[str, np.ndarray],
    uniq_ids: np.ndarray,
    corpus: dict[str, float],
    recomputed: tuple[str, ...] = (),
) -> DirectionValues:
    """A direction's `DirectionValues` from its score vectors and its sentences' ids (str)."""
    every = sentences_digest(uniq_ids)  # that of most columns: those scored everywhere
    return DirectionValues(
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        n_sentences=len(uniq_ids),
        scores=scores,
        sentences={
            column: every if finite.all() else sentences_digest(uniq_ids[finite])
            for column, finite in ((c, np.isfinite(v)) for c, v in scores.items())
        },
        corpus=corpus,
        recomputed=recomputed,
    )


def _only_value(table: pa.Table, column: str, source: str) -> str:
    values = pc.unique(table[column]).to_pylist()
    if len(values) != 1:
        raise ValueError(f"{source}: one direction expected, found {column} {values[:5]}")
    return values[0]


def _float_values(table: pa.Table, column: str) -> np.ndarray:
    if column not in table.column_names:
        return np.full(table.num_rows, np.nan)
    return np.asarray(table[column].to_numpy(), dtype=np.float64)


def score_table(
    directions: Sequence[DirectionValues],
    columns: Sequence[str],
    corpus_columns: Collection[str],
    resampling: Resampling,
) -> DirectionTable:
    """Per direction: sentences, per score column its mean with a 95% bootstrap interval, then
    the corpus-level scores of the columns that have one. Means skip missing values (NaN)."""
    ordered = sorted(directions, key=lambda direction: (direction.src_lang, direction.tgt_lang))
    for first, second in itertools.pairwise(ordered):
        if (first.src_lang, first.tgt_lang) == (second.src_lang, second.tgt_lang):
            raise ValueError(f"direction {first.src_lang}-{first.tgt_lang} is scored twice")
    # Every column at once: the draws are made once per number of sentences.
    resampled = bootstrap_mean_matrix(
        [direction.scores[column] for column in columns for direction in ordered], resampling
    ).reshape(len(columns), len(ordered), resampling.bootstrap_resamples)
    table: dict[str, Any] = {
        "src_lang": [direction.src_lang for direction in ordered],
        "tgt_lang": [direction.tgt_lang for direction in ordered],
        "n_sentences": [direction.n_sentences for direction in ordered],
    }
    means = {
        column: np.array([skipna_mean(direction.scores[column]) for direction in ordered])
        for column in columns
    }
    for column, resamples in zip(columns, resampled, strict=True):
        table[column] = means[column]
        table[f"{column}_ci_low"], table[f"{column}_ci_high"] = percentile_intervals(resamples)
    for column in columns:
        if column in corpus_columns:
            table[f"{column}_corpus"] = [direction.corpus[column] for direction in ordered]
    statistics = ResampledScores(
        directions=[(direction.src_lang, direction.tgt_lang) for direction in ordered],
        statistics=resampling.signature(),
        means=means,
        resamples=dict(zip(columns, resampled, strict=True)),
        sentences={
            column: np.array([direction.sentences[column] for direction in ordered], dtype=str)
            for column in columns
        },
    )
    return DirectionTable(pd.DataFrame(table), statistics)


def direction_scores(
    rows: pd.DataFrame,
    metric_columns: Sequence[str],
    resampling: Resampling,
    corpus_metrics: Sequence[CorpusMetric] = (),
) -> pd.DataFrame:
    """scores.csv for rows of any directions in memory (see `score_table`)."""
    return direction_table(rows, metric_columns, resampling, corpus_metrics).scores


def direction_table(
    rows: pd.DataFrame,
    metric_columns: Sequence[str],
    resampling: Resampling,
    corpus_metrics: Sequence[CorpusMetric] = (),
) -> DirectionTable:
    """`score_table` of rows of any directions in memory."""
    columns = numeric_columns(rows, metric_columns)
    groups = rows.groupby(GROUP_COLUMNS, sort=True).indices
    if corpus_metrics:  # their statistics, or else their texts, a direction at a time
        directions = [
            direction_values(
                pa.Table.from_pandas(rows.iloc[positions], preserve_index=False),
                columns,
                corpus_metrics,
                str(key),
            )
            for key, positions in groups.items()
        ]
    else:  # the score columns as arrays, sliced per direction
        values = {column: rows[column].to_numpy(dtype=np.float64) for column in columns}
        uniq_ids = np.asarray(
            rows["uniq_id"].to_numpy() if "uniq_id" in rows else np.arange(len(rows)), dtype=str
        )
        directions = [
            _values(
                str(src),
                str(tgt),
                {column: vector[positions] for column, vector in values.items()},
                uniq_ids[positions] if "uniq_id" in rows else uniq_ids[: len(positions)],
                {},
            )
            for (src, tgt), positions in groups.items()
        ]
    corpus_columns = {metric.corpus_column for metric in corpus_metrics}
    return score_table(directions, columns, corpus_columns, resampling)


def summary(table: DirectionTable) -> pd.DataFrame:
    """Macro averages over directions: overall, by source, by target, and relative to English.

    Each mean (and corpus score) is the mean over the group's directions; the interval of a
    mean resamples sentences within each direction (`stats.macro_interval`). The groups are
    index arrays into the directions, each column a numpy vector: a group costs its own
    arithmetic, not a table of its own.
    """
    scores = table.scores
    averaged = [
        c
        for c in scores.columns
        if c not in (*GROUP_COLUMNS, "n_sentences", COST, UNSEEN)
        and not c.endswith(("_ci_low", "_ci_high"))
    ]
    everything = np.arange(len(scores))
    groups: list[tuple[str, str, np.ndarray]] = [("all", "all", everything)]
    for by in GROUP_COLUMNS:
        indices = scores.groupby(by).indices
        groups += [(by, str(code), indices[code]) for code in sorted(indices)]
    groups += [
        ("english", name, np.flatnonzero(selected.to_numpy()))
        for name, selected in english_groups(scores).items()
    ]
    values = {column: scores[column].to_numpy(dtype=np.float64) for column in averaged}
    costs = scores[COST].to_numpy(dtype=np.float64) if COST in scores else None
    records = []
    for by, name, members in groups:
        if not len(members):
            continue
        record: dict[str, Any] = {"group_by": by, "group": name, "n_directions": len(members)}
        # As pandas averages a column: NaN left out (`stats.skipna_mean`).
        record |= {column: skipna_mean(vector[members]) for column, vector in values.items()}
        if costs is not None:  # what the group's directions cost together
            record[COST] = float(np.nansum(costs[members]))
        for column, resampled in table.resampled.resamples.items():
            interval = macro_interval(resampled[members])
            record[f"{column}_ci_low"], record[f"{column}_ci_high"] = interval
        records.append(record)
    per_direction = [c for c in scores.columns if c not in (*GROUP_COLUMNS, "n_sentences")]
    order = ["group_by", "group", "n_directions", *per_direction]
    return pd.DataFrame.from_records(records, columns=order)


class RowsReader(Protocol):
    """What else is made of scored_rows.parquet's rows as they are written (`write_aggregates`)."""

    def add(self, table: pa.Table) -> None:
        """The next direction's rows, as the file holds them."""


def write_aggregates(
    scored_paths: Sequence[Path],
    metrics: Sequence[Metric],
    resampling: Resampling,
    outputs: dict[str, Path],
    timing: pd.DataFrame | None = None,
    reader: Callable[[int, Sequence[str]], RowsReader] | None = None,
) -> pd.DataFrame:
    """Write `scores` (csv), `summary` (csv), `scored_rows` (parquet) and `resampled` (npz,
    see `results.resampled`) from scored files; the cost of each direction, where
    `timing` (see `timing_table`) holds one, goes beside its scores. `reader(rows, columns)`,
    where given, makes a `RowsReader` for the file's `rows` and `columns`, which is handed
    each direction's rows as they are written (the report's extract: `extracts.ExtractBuilder`).

    Files are read one at a time, so memory holds the scores of every direction but the rows of
    only a few.
    """
    footers = [pq.read_metadata(path) for path in scored_paths]
    schema = scored_rows_schema([footer.schema.to_arrow_schema() for footer in footers])
    columns = [
        column
        for column in metric_columns(metrics)
        if column in schema.names and _is_numeric(schema.field(column).type)
    ]
    with_corpus = corpus_metrics(metrics)
    directions = []
    sink = None if reader is None else reader(sum(f.num_rows for f in footers), schema.names)
    with (
        atomic_path(outputs["scored_rows"]) as temporary,
        pq.ParquetWriter(temporary, schema) as writer,
    ):
        pending: list[pa.Table] = []
        for path, footer in zip(scored_paths, footers, strict=True):
            with pq.ParquetFile(path, metadata=footer) as scored:
                rows = scored.read()
            if rows.num_rows:
                directions.append(direction_values(rows, columns, with_corpus, str(path)))
            pending.append(_conform(rows, schema))
            if sink is not None:
                sink.add(pending[-1])
            if sum(table.num_rows for table in pending) >= ROW_GROUP_ROWS:
                writer.write_table(pa.concat_tables(pending))
                pending = []
        if pending:
            writer.write_table(pa.concat_tables(pending))
    _warn_recomputed(directions)
    table = score_table(
        directions, columns, {metric.corpus_column for metric in with_corpus}, resampling
    )
    if timing is not None and COST in timing:
        costs = timing[[*GROUP_COLUMNS, COST]]
        table = replace(table, scores=table.scores.merge(costs, on=list(GROUP_COLUMNS), how="left"))
    table = replace(table, scores=with_unseen(table.scores, MetricSet.of_loaded(metrics)))
    write_csv(outputs["scores"], table.scores)
    write_csv(outputs["summary"], summary(table))
    table.resampled.write(outputs["resampled"])
    return table.scores


def with_unseen(scores: pd.DataFrame, metrics: MetricSet) -> pd.DataFrame:
    """`scores` with the UNSEEN column, when any of `metrics` is learned."""
    if not metrics.learned():
        return scores
    unseen = [
        ",".join(metrics.uncovered(str(src), str(tgt)))
        for src, tgt in zip(scores["src_lang"], scores["tgt_lang"], strict=True)
    ]
    return scores.assign(**{UNSEEN: unseen})


def scored_rows_schema(schemas: Sequence[pa.Schema]) -> pa.Schema:
    """The columns of scored_rows.parquet: those of every scored file (types promoted where
    files differ, such as a column of nulls), less the statistics of corpus metrics."""
    try:
        schema = pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise ValueError(f"scored files disagree on the type of a column: {error}") from None
    return pa.schema(field for field in schema if not is_statistics_column(field.name))


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with the columns of `schema`, in its order and types; nulls where it lacks one."""
    table = table.drop_columns([name for name in table.column_names if is_statistics_column(name)])
    if table.schema.equals(schema, check_metadata=False):
        return table
    columns = [
        table[field.name].cast(field.type)
        if field.name in table.column_names
        else pa.nulls(table.num_rows, field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _is_numeric(data_type: pa.DataType) -> bool:
    """What pandas counts as numeric (`numeric_columns`), for a column of a parquet file."""
    return any(
        test(data_type) for test in (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean)
    )


def _warn_recomputed(directions: Sequence[DirectionValues]) -> None:
    stale = [direction for direction in directions if direction.recomputed]
    if stale:
        metrics = sorted({name for direction in stale for name in direction.recomputed})
        log.warning(
            "%d directions were scored before the statistics of %s were kept: they were read "
            "from the texts again (slow); rescoring them makes aggregation fast",
            len(stale),
            ", ".join(metrics),
        )


def recorded_signatures(scored_paths: Sequence[Path]) -> dict[str, str]:
    """The metric signatures the scoring jobs recorded beside their outputs.

    Read rather than recomputed: a metric's signature can depend on where it ran (MetricX's
    dtype follows the scoring job's GPU), and aggregation runs elsewhere, without the models.
    """
    signatures: dict[str, str] = {}
    for path in scored_paths:
        record = ResumableOutput(path, {}).record() or {}
        for name, signature in (record.get("environment") or {}).get("metrics", {}).items():
            if signatures.setdefault(name, signature) != signature:
                raise ValueError(
                    f"{path} was scored with {name} '{signature}', other directions with "
                    f"'{signatures[name]}': rerun the scoring of this model"
                )
    return signatures


def recorded_environments(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The distinct environments (versions, GPUs, model commits) that produced `paths`, as
    their jobs recorded them; the metric signatures, reported apart, are left out. A scored
    file names those of the jobs that scored its metrics (`scored_by`)."""
    distinct: dict[str, dict[str, Any]] = {}
    for path in paths:
        record = ResumableOutput(path, {}).record() or {}
        recorded = dict(record.get("environment") or {})
        for environment in recorded.pop("scored_by", [recorded]):
            environment = {k: v for k, v in environment.items() if k != "metrics"}
            if environment:
                distinct.setdefault(json.dumps(environment, sort_keys=True), environment)
    return list(distinct.values())


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
    settings: Mapping[str, Any],
    model_settings: dict[str, Any],
    model_name: str,
    dataset_identity: dict[str, Any],
    directions: Sequence[Direction],
    metric_signatures: dict[str, str],
    resampling: Resampling,
    timing: dict[str, Any],
    environments: dict[str, list[dict[str, Any]]],
    workflow: dict[str, Any] | None,
    command: list[str] | None,
) -> dict[str, Any]:
    """What produced the outputs (the configuration and settings hold no secret).

    `settings`: what the model's aggregate job read of the configuration (its slice: the
    metrics and their settings, the statistics, `limit`, this model's entry as it decides the
    translations and its prices), recorded as `config`: a model's files, and the submission
    made of them, carry no other model's settings, and no setting that changes no output.

    `environments`: per stage (translate, score), what its jobs ran with (package versions,
    GPUs, the commits hub models resolved to); `workflow`: the workflow's git commit;
    `command`: the run's command line, known secrets scrubbed.
    """
    from importlib.metadata import version

    return {
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "bouquet_eval_version": package_version(),
        "snakemake_version": version("snakemake"),
        "python_version": platform.python_version(),
        "workflow": workflow,
        "command": command,
        "model": {"name": model_name, **model_settings},
        "dataset": dataset_identity,
        "limit": settings.get("limit"),
        "config": dict(settings),
        "n_directions": len(directions),
        "directions": [direction.name for direction in directions],
        "metrics": metric_signatures,
        "environments": environments,
        "statistics": resampling.signature(),
        "timing": timing,
    }


def append_manifest(path: Path, entry: dict[str, Any]) -> None:
    """Add `entry` to the manifest's history; earlier entries are kept as they are."""
    history = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"entries": []}
    history["entries"].append(entry)
    write_json(path, history)
