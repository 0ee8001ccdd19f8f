"""The leaderboard across models: leaderboard.csv and its Markdown rendering.

One row per model: macro means over directions of every metric with 95% intervals (sentences
resampled within directions), the into-/out-of-/without-English breakdown of the primary
metric, a rank, and a significance cluster from paired bootstrap tests on the primary metric.
Models evaluated on other directions or sentences than the others are marked, not ranked;
reference points (the references themselves, the sources copied) are listed last as the
bounds they are, not ranked either.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bouquet_eval.core.io import write_atomically
from bouquet_eval.core.stats import (
    Resampling,
    paired_bootstrap_p,
    paired_samples_of,
    pool,
)
from bouquet_eval.metrics import Metric
from bouquet_eval.metrics.records import PRIMARY_PREFERENCE, MetricSet
from bouquet_eval.results.aggregate import (
    ENGLISH_GROUPS,
    GROUP_COLUMNS,
    UNSEEN,
    direction_table,
    english_groups,
    write_csv,
)
from bouquet_eval.results.resampled import (
    ResampledScores,
    distance_bootstrap_p,
    pooled_paired_p,
)

SENTENCE_KEY = [*GROUP_COLUMNS, "uniq_id"]
SIGNIFICANCE_LEVEL = 0.05


def score_columns(metrics: Sequence[Metric]) -> list[str]:
    """The metrics' per-sentence columns that hold scores (labels left out), composite too."""
    return MetricSet.of_loaded(metrics).score_columns()


def lower_is_better_columns(metrics: Sequence[Metric]) -> frozenset[str]:
    return MetricSet.of_loaded(metrics).lower_is_better()


def target_columns(metrics: Sequence[Metric]) -> dict[str, float]:
    """The columns whose best value is a target (`MetricRecord.targets`), with it."""
    return MetricSet.of_loaded(metrics).targets()


def report_decimals(metrics: Sequence[Metric]) -> dict[str, int]:
    """Each score column's decimal places in the report's tables (`MetricRecord.decimals`)."""
    return MetricSet.of_loaded(metrics).decimals()


def primary_metric(columns: Sequence[str]) -> str:
    for column in PRIMARY_PREFERENCE:
        if column in columns:
            return column
    if not columns:
        raise ValueError("no metric column to rank models by")
    return columns[0]


@dataclass(frozen=True)
class ModelResults:
    """What aggregation wrote for one model: scores.csv and its sentence scores."""

    name: str
    scores: pd.DataFrame
    """scores.csv: one row per direction."""
    sentence_scores: pd.DataFrame | Path
    """Sentence scores (src_lang, tgt_lang, uniq_id and the metric columns), or the
    scored_rows.parquet they are read from when needed (`rows`): about 900,000 rows a model
    at BOUQuET's size, which the leaderboard does not keep for every model at once."""
    resampled: ResampledScores | None = None
    """Its aggregation's bootstrap resamples (resampled.npz); made from `rows` where None."""
    sentence_columns: tuple[str, ...] = ()
    """The columns of `sentence_scores` read from its file."""

    @property
    def rows(self) -> pd.DataFrame:
        """The sentence scores, read from their file each time where they were not given."""
        if isinstance(self.sentence_scores, pd.DataFrame):
            return self.sentence_scores
        return pd.read_parquet(self.sentence_scores, columns=list(self.sentence_columns))

    @classmethod
    def read(
        cls,
        name: str,
        paths: tuple[Path, Path, Path],
        columns: Sequence[str],
        resampling: Resampling,
    ) -> Any:
        """From its scores.csv, scored_rows.parquet and resampled.npz."""
        import pyarrow.parquet as pq

        scores_csv, scored_rows, resampled = paths
        available = set(pq.read_schema(scored_rows).names)
        wanted = SENTENCE_KEY + [c for c in columns if c in available]
        return cls(
            name,
            pd.read_csv(scores_csv),
            scored_rows,
            ResampledScores.read(resampled, resampling.signature()),
            tuple(wanted),
        )

    def statistics(self, columns: Sequence[str], resampling: Resampling) -> ResampledScores:
        if self.resampled is not None:
            return self.resampled
        return direction_table(self.rows, columns, resampling).resampled

    def coverage(self) -> frozenset[tuple[str, str, int]]:
        return frozenset(
            (str(r.src_lang), str(r.tgt_lang), int(r.n_sentences))
            for r in self.scores.itertuples(index=False)
        )


def build_leaderboard(
    results: Sequence[ModelResults],
    columns: Sequence[str],
    lower_is_better: Iterable[str],
    resampling: Resampling,
    bounds: Mapping[str, str] | None = None,
    targets: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """The leaderboard, best model first by the primary metric (see the module docstring);
    `bounds` (see `translators.backends.bounds`) are reference points, listed last as the
    upper or lower bound they are, and not ranked; `targets`: the columns whose best value is
    a target (`MetricRecord.targets`), a model closer to it ranking first."""
    if not results:
        raise ValueError("a leaderboard needs at least one model")
    columns = [c for c in columns if all(c in r.scores for r in results)]
    primary = primary_metric(columns)
    lower = set(lower_is_better)
    bounds = bounds or {}
    notes = {
        **_incomparable(results),
        **{name: f"a reference point, the {bound} bound, not ranked" for name, bound in
           bounds.items()},
    }  # fmt: skip
    statistics = {r.name: r.statistics(columns, resampling) for r in results}
    records = [_model_record(r, statistics[r.name], columns, primary) for r in results]
    for record in records:
        record["comparable"] = record["model"] not in notes
        record["bound"] = bounds.get(record["model"], "")
        record["note"] = notes.get(record["model"], "")
    board = pd.DataFrame.from_records(records)
    target = (targets or {}).get(primary)
    # What ranks: the score, or its distance to the target.
    board[_RANK_KEY] = board[primary] if target is None else (board[primary] - target).abs()
    ascending = primary in lower or target is not None
    board = board.sort_values(
        ["comparable", "bound", _RANK_KEY],
        ascending=[False, True, ascending],
        na_position="last",
        kind="stable",
    ).reset_index(drop=True)
    ranked = board["comparable"] & board[primary].notna()
    board.insert(
        0,
        "rank",
        board.loc[ranked, _RANK_KEY]
        .rank(method="min", ascending=ascending)
        .astype("Int64")
        .reindex(board.index),
    )
    board = board.drop(columns=_RANK_KEY)
    by_name = {r.name: r for r in results}
    ranked_names = board.loc[ranked, "model"].tolist()
    p_values, clusters = significance_clusters(
        [by_name[name] for name in ranked_names],
        [statistics[name] for name in ranked_names],
        primary,
        resampling,
        target,
    )
    board["p_vs_best"] = (
        pd.Series(dict(zip(ranked_names, p_values, strict=True))).reindex(board["model"]).to_numpy()
    )
    # Integers, with <NA> for the unranked: `to_numpy()` would make them floats (1.0) in the
    # CSV, the Markdown and the pages.
    board["cluster"] = (
        pd.Series(dict(zip(ranked_names, clusters, strict=True)), dtype="Int64")
        .reindex(board["model"])
        .array
    )
    board.attrs["primary"] = primary
    board.attrs["targets"] = dict(targets or {})
    return board


_RANK_KEY = "_rank_key"


def _model_record(
    result: ModelResults, statistics: ResampledScores, columns: Sequence[str], primary: str
) -> dict[str, Any]:
    scores = result.scores
    record: dict[str, Any] = {
        "model": result.name,
        "n_directions": len(scores),
        "n_sentences": int(scores["n_sentences"].sum()),
    }
    for column in columns:
        record[column] = scores[column].mean()
        low, high = statistics.interval(column)
        record[f"{column}_ci_low"] = low
        record[f"{column}_ci_high"] = high
    for group, selected in english_groups(scores).items():
        record[f"{primary}_{group}"] = scores.loc[selected, primary].mean()
    record.update(unseen_counts(scores))
    return record


UNSEEN_SUFFIX = "_unseen_directions"


def unseen_counts(scores: pd.DataFrame) -> dict[str, int]:
    """Per learned metric, how many of the directions its macro means rest on are in a
    language its model was not trained on (scores.csv's UNSEEN column)."""
    if UNSEEN not in scores:
        return {}
    named = [str(value).split(",") for value in scores[UNSEEN].fillna("") if str(value)]
    counts = Counter(metric for names in named for metric in names)
    return {f"{metric}{UNSEEN_SUFFIX}": count for metric, count in sorted(counts.items())}


def unseen_notes(board: pd.DataFrame) -> list[str]:
    """One sentence per model and learned metric with directions its model never saw."""
    notes = []
    for record in board.to_dict(orient="records"):
        for column in board.columns:
            count = record[column]
            if column.endswith(UNSEEN_SUFFIX) and not pd.isna(count) and count:
                metric = column.removesuffix(UNSEEN_SUFFIX)
                notes.append(
                    f"{record['model']}: {int(count)} of the {record['n_directions']} directions "
                    f"of its {metric} means are in a language {metric}'s model was not trained on"
                )
    return notes


def _incomparable(results: Sequence[ModelResults]) -> dict[str, str]:
    """Why a model cannot be ranked beside the others (keyed by model), if it cannot.

    The reference is the set of directions and sentence counts most models share; models
    outside it would be averaged over other directions, so they are marked instead.
    """
    coverages = {r.name: r.coverage() for r in results}
    reference, _ = Counter(coverages.values()).most_common(1)[0]
    reference_directions = {(s, t) for s, t, _ in reference}
    reasons = {}
    for name, coverage in coverages.items():
        if coverage == reference:
            continue
        directions = {(s, t) for s, t, _ in coverage}
        shared = len(directions & reference_directions)
        if directions != reference_directions:
            reasons[name] = (
                f"evaluated on {len(directions)} directions, {shared} of them shared with the "
                f"{len(reference_directions)} of the other models: not ranked"
            )
        else:
            reasons[name] = "evaluated on other sentence counts than the other models: not ranked"
    return reasons


def significance_clusters(
    models: Sequence[ModelResults],
    statistics: Sequence[ResampledScores],
    column: str,
    resampling: Resampling,
    target: float | None = None,
) -> tuple[list[float], list[int]]:
    """For models in rank order: p-value against the best, and significance clusters.

    A paired bootstrap test (sentences resampled within directions, the macro mean as
    statistic) on `column`; for a column with a `target`, of the macro means' distances to it
    (`resampled.distance_bootstrap_p`). Clusters are formed top-down as WMT reports them: a
    model joins the current cluster when it is not significantly different from the cluster's
    best model, and starts the next cluster otherwise; cluster 1 holds the models tied with
    the best. A model whose sentences differ from the compared model's gets no cluster.

    Each test is the difference of the two models' resamples (`resampled.pooled_paired_p`),
    or, where they did not score the same sentences in the same order, made from their rows.
    """
    if not models:
        return [], []

    def p_value(first: int, second: int) -> float:
        if target is not None:
            return distance_bootstrap_p(statistics[first], statistics[second], column, target)
        if statistics[first].pairs_with(statistics[second], column):
            return pooled_paired_p(statistics[first], statistics[second], column)
        return paired_p_value(models[first].rows, models[second].rows, column, resampling)

    p_vs_best = [float("nan")] + [p_value(0, i) for i in range(1, len(models))]
    clusters = [1]
    head = 0
    for i in range(1, len(models)):
        p = p_vs_best[i] if head == 0 else p_value(head, i)
        if math.isnan(p):
            raise ValueError(f"no paired sentences to compare on {column}")
        if p < SIGNIFICANCE_LEVEL:
            head = i
            clusters.append(clusters[-1] + 1)
        else:
            clusters.append(clusters[-1])
    return p_vs_best, clusters


def paired_p_value(
    baseline: pd.DataFrame, system: pd.DataFrame, column: str, resampling: Resampling
) -> float:
    """Paired bootstrap p of the macro-mean difference on `column`, pooled over directions."""
    merged = baseline[[*SENTENCE_KEY, column]].merge(
        system[[*SENTENCE_KEY, column]], on=SENTENCE_KEY, suffixes=("_a", "_b")
    )
    if len(merged) != len(baseline) or len(merged) != len(system):
        raise ValueError(
            f"models were not evaluated on the same sentences ({len(baseline)} and "
            f"{len(system)} sentences, {len(merged)} shared)"
        )
    pairs = [
        (group[f"{column}_a"], group[f"{column}_b"])
        for _, group in merged.groupby(GROUP_COLUMNS, sort=True)
    ]
    return paired_bootstrap_p(pool(paired_samples_of(pairs, resampling)))


# --- Markdown -------------------------------------------------------------------------------


MISSING = "\N{EN DASH}"


def format_score(value: float, scale: float) -> str:
    """Three decimals for scores within [-1, 1] (`scale`: the largest magnitude), else two."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return f"{value:.3f}" if scale <= 1 else f"{value:.2f}"


def display_scales(board: pd.DataFrame) -> dict[str, float]:
    """Per metric column, the largest magnitude on the board (see `format_score`)."""
    return {
        column: float(np.nanmax(np.abs(board[column].to_numpy(dtype=float)), initial=0))
        for column in metric_columns_of(board)
    }


def metric_columns_of(board: pd.DataFrame) -> list[str]:
    """The metric columns of a leaderboard (those that have an interval)."""
    return [c.removesuffix("_ci_low") for c in board.columns if c.endswith("_ci_low")]


def best_mark(column: str, lower: Collection[str], targets: Mapping[str, float]) -> str:
    """A column's best in a table's header: ↑ the highest, ↓ the lowest, →t the closest to its
    target t."""
    if column in targets:
        return f"→{targets[column]:g}"
    return "↓" if column in lower else "↑"


def markdown_table(
    board: pd.DataFrame, lower_is_better: Iterable[str], title: str = "Leaderboard"
) -> str:
    """The leaderboard as a Markdown table: each metric as mean [95% interval]."""
    primary = board.attrs.get("primary") or primary_metric(metric_columns_of(board))
    lower = set(lower_is_better)
    targets = board.attrs.get("targets", {})
    metrics = metric_columns_of(board)
    scale = display_scales(board)

    header = ["rank", "model", "cluster", "directions", "sentences"]
    header += [f"{c} {best_mark(c, lower, targets)}" for c in metrics]
    header += [f"{primary} {g.replace('_', ' ')}" for g in ENGLISH_GROUPS]
    lines = [f"# {title}", "", _row(header), _row(["---"] * len(header))]
    for record in board.to_dict(orient="records"):
        cells = [
            _integer(record["rank"]),
            str(record["model"]) + ("" if record["comparable"] else " *"),
            _integer(record["cluster"]),
            str(record["n_directions"]),
            str(record["n_sentences"]),
        ]
        for column in metrics:
            cells.append(
                f"{format_score(record[column], scale[column])} "
                f"[{format_score(record[f'{column}_ci_low'], scale[column])}, "
                f"{format_score(record[f'{column}_ci_high'], scale[column])}]"
            )
        cells += [
            format_score(record[f"{primary}_{group}"], scale[primary]) for group in ENGLISH_GROUPS
        ]
        lines.append(_row(cells))
    lines += ["", *_footnotes(board, primary, lower, targets.get(primary))]
    return "\n".join(lines) + "\n"


def _footnotes(
    board: pd.DataFrame, primary: str, lower: set[str], target: float | None
) -> list[str]:
    if target is not None:
        better = f"closest to {target:g} is best"
    else:
        better = f"{'lower' if primary in lower else 'higher'} is better"
    notes = [
        f"Ranked by {primary} ({better}), the macro mean over directions; [low, high] is its "
        "95% bootstrap interval (sentences resampled within directions).",
        f"Cluster 1 holds the models not significantly different from the best (paired "
        f"bootstrap on {primary}, p ≥ {SIGNIFICANCE_LEVEL}); each later cluster starts at the "
        "first model significantly worse than the previous cluster's best.",
    ]
    for record in board.to_dict(orient="records"):
        if not record["comparable"]:
            notes.append(f"\\* {record['model']}: {record['note']}.")
    notes += [f"{note}." for note in unseen_notes(board)]
    return [f"{note}  " for note in notes]


def _integer(value: Any) -> str:
    return MISSING if value is None or pd.isna(value) else str(int(value))


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def read_results(
    models: Sequence[str],
    folders: Sequence[tuple[Path, Path, Path]],
    columns: Sequence[str],
    resampling: Resampling,
) -> list[ModelResults]:
    """Each model's results from its (scores.csv, scored_rows.parquet, resampled.npz)."""
    return [
        ModelResults.read(name, paths, columns, resampling)
        for name, paths in zip(models, folders, strict=True)
    ]


def write_leaderboard(
    board: pd.DataFrame,
    csv_path: Path,
    markdown_path: Path,
    lower_is_better: Iterable[str],
) -> None:
    write_csv(csv_path, board)
    text = markdown_table(board, lower_is_better)
    write_atomically(markdown_path, lambda t: t.write_text(text, encoding="utf-8"))
