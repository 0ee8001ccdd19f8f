"""correlations.csv: each metric's agreement with people, per direction and pooled.

One row per scope and metric. The scopes: every judged direction, then the pools `all`,
`into_english` and `out_of_english` (directions with eng_Latn as target, as source). Each
statistic of `agreement.Agreement` has a 95% bootstrap interval: the items (source segments)
of each direction are drawn with replacement, `statistics.bootstrap_resamples` times, with
the project's draws (`stats.Resampling`), a pool drawing within each of its directions
(stratified), so a direction's draws are the same alone and in a pool.

In each scope, the metric with the highest `metaeval.decide_by` statistic is the best; it is
tested against every other metric with a paired permutation test over segments
(`agreement.permutation_p`), and the p-values of all tests of the run are corrected together
with Benjamini-Hochberg (`stats.benjamini_hochberg`), as the leaderboard's are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from bouquet_eval.core.stats import Resampling, benjamini_hochberg, percentile_interval
from bouquet_eval.data.dataset import Direction
from bouquet_eval.data.outputs import scored_path
from bouquet_eval.metrics import load_metrics
from bouquet_eval.results.agreement import (
    Agreement,
    Items,
    agreement,
    permutation_p,
)
from bouquet_eval.results.leaderboard import lower_is_better_columns, score_columns
from bouquet_eval.results.mtme import reference_free_columns
from bouquet_eval.results.weighted_agreement import resampled_statistics

ENGLISH = "eng_Latn"
POOLS = ("all", "into_english", "out_of_english")


@dataclass(frozen=True)
class Settings:
    seed: int = 12345
    bootstrap_resamples: int = 1000
    permutation_trials: int = 1000
    decide_by: str = "acc_eq"
    significance: float = 0.05

    @classmethod
    def of(cls, config: Mapping[str, object]) -> Settings:
        statistics = config["statistics"]
        metaeval = config["metaeval"]
        assert isinstance(statistics, Mapping) and isinstance(metaeval, Mapping)
        return cls(
            seed=statistics["seed"],
            bootstrap_resamples=statistics["bootstrap_resamples"],
            permutation_trials=metaeval["permutation_trials"],
            decide_by=metaeval["decide_by"],
            significance=metaeval["significance"],
        )

    def signature(self) -> str:
        return (
            f"ci:95|bs:{self.bootstrap_resamples}|perm:{self.permutation_trials}|"
            f"by:{self.decide_by}|fdr:{self.significance}|seed:{self.seed}"
        )


def oriented(scores: Mapping[str, np.ndarray], lower_is_better: set[str]) -> dict[str, np.ndarray]:
    """Every metric's scores with higher meaning better (MetricX's error score negated)."""
    return {
        column: -np.asarray(values, float)
        if column in lower_is_better
        else np.asarray(values, float)
        for column, values in scores.items()
    }


def scopes(table: pd.DataFrame) -> list[tuple[str, str, np.ndarray]]:
    """(kind, name, row mask) of every direction, sorted, then of every non-empty pool."""
    direction = table["src_lang"] + "-" + table["tgt_lang"]
    found = [
        ("direction", name, (direction == name).to_numpy()) for name in sorted(direction.unique())
    ]
    pools = {
        "all": np.ones(len(table), bool),
        "into_english": (table["tgt_lang"] == ENGLISH).to_numpy(),
        "out_of_english": (table["src_lang"] == ENGLISH).to_numpy(),
    }
    found += [("pooled", name, mask) for name, mask in pools.items() if mask.any()]
    return found


def codes(values: pd.Series) -> np.ndarray:
    return pd.factorize(values, sort=True)[0]


def correlations(
    table: pd.DataFrame, scores: Mapping[str, np.ndarray], settings: Settings
) -> pd.DataFrame:
    """The rows of correlations.csv for the checked judgements `table` and every metric's
    oriented per-row `scores` (aligned with the table's rows)."""
    direction = table["src_lang"] + "-" + table["tgt_lang"]
    # Item codes sorted by direction first, so that a direction's items are contiguous.
    items = codes(direction + "\t" + table["segment"])
    systems = codes(table["system"])
    groups = codes(direction)
    human = table["human"].to_numpy(float)
    resampling = Resampling(seed=settings.seed, bootstrap_resamples=settings.bootstrap_resamples)
    records = []
    tests = []
    for kind, name, mask in scopes(table):
        scope_rows = np.flatnonzero(mask)
        per_metric = {}
        for metric, values in scores.items():
            usable = scope_rows[np.isfinite(values[scope_rows])]
            observed = agreement(
                human[usable], values[usable], items[usable], systems[usable], groups[usable]
            )
            low, high = _intervals(human, values, items, systems, groups, usable, resampling)
            per_metric[metric] = usable
            record = {
                "scope": kind,
                "name": name,
                "src_lang": name.split("-")[0] if kind == "direction" else "",
                "tgt_lang": name.split("-")[1] if kind == "direction" else "",
                "metric": metric,
                **asdict(observed),
            }
            for statistic in Agreement.statistics():
                record[f"{statistic}_low"] = low[statistic]
                record[f"{statistic}_high"] = high[statistic]
            records.append(record)
        first = len(records) - len(scores)
        tests += _best_against_others(
            first, records[first:], human, scores, items, per_metric, settings
        )
    frame = pd.DataFrame(records)
    frame["best"] = False
    frame["p_vs_best"] = np.nan
    frame["p_vs_best_adjusted"] = np.nan
    frame["best_significantly_better"] = pd.array([pd.NA] * len(frame), dtype="boolean")
    if tests:
        adjusted = benjamini_hochberg([p for _, _, p in tests])
        for (position, _, p), q in zip(tests, adjusted, strict=True):
            frame.loc[position, ["p_vs_best", "p_vs_best_adjusted"]] = [p, q]
            frame.loc[position, "best_significantly_better"] = bool(q < settings.significance)
    for position in _best_positions(records, settings.decide_by):
        frame.loc[position, "best"] = True
    frame.insert(len(frame.columns), "signature", settings.signature())
    return frame


def _best_positions(records: Sequence[Mapping[str, object]], statistic: str) -> list[int]:
    best: dict[tuple[object, object], tuple[float, int]] = {}
    for position, record in enumerate(records):
        value = float(record[statistic])  # type: ignore[arg-type]
        key = (record["scope"], record["name"])
        if np.isfinite(value) and (key not in best or value > best[key][0]):
            best[key] = (value, position)
    return [position for _, position in best.values()]


def _best_against_others(
    first_position: int,
    scope_records: Sequence[Mapping[str, object]],
    human: np.ndarray,
    scores: Mapping[str, np.ndarray],
    items: np.ndarray,
    usable: Mapping[str, np.ndarray],
    settings: Settings,
) -> list[tuple[int, str, float]]:
    """(record position, metric, p) of the best metric against each other metric of a scope,
    whose records start at `first_position` of the whole table."""
    statistic = settings.decide_by
    values = {str(r["metric"]): float(r[statistic]) for r in scope_records}  # type: ignore[arg-type]
    finite = {m: v for m, v in values.items() if np.isfinite(v)}
    if len(finite) < 2:
        return []
    best = str(max(finite, key=lambda m: finite[m]))
    results = []
    for offset, record in enumerate(scope_records):
        other = str(record["metric"])
        if other == best:
            continue
        rows = np.intersect1d(usable[best], usable[other])
        _, p = permutation_p(
            statistic,
            human[rows],
            scores[best][rows],
            scores[other][rows],
            items[rows],
            settings.seed,
            settings.permutation_trials,
        )
        results.append((first_position + offset, other, p))
    return results


def _intervals(
    human: np.ndarray,
    metric: np.ndarray,
    items: np.ndarray,
    systems: np.ndarray,
    groups: np.ndarray,
    rows: np.ndarray,
    resampling: Resampling,
) -> tuple[dict[str, float], dict[str, float]]:
    """95% bootstrap intervals of every statistic over `rows`, items drawn within directions."""
    statistics = Agreement.statistics()
    resampled = np.full((len(statistics), resampling.bootstrap_resamples), np.nan)
    if rows.size:
        grouped = Items.of(items[rows])
        item_groups = groups[rows][grouped.order[grouped.starts]]
        draws = np.zeros((resampling.bootstrap_resamples, grouped.starts.size))
        for group in np.unique(item_groups):
            inside = np.flatnonzero(item_groups == group)
            draws[:, inside] = resampling.bootstrap_weights(inside.size)
        # Item codes 0..K-1 in the order of `grouped`, the columns of `draws`.
        item_codes = np.empty(rows.size, np.int64)
        item_codes[grouped.order] = np.repeat(np.arange(grouped.starts.size), grouped.sizes)
        resampled = resampled_statistics(
            human[rows], metric[rows], item_codes, systems[rows], groups[rows], draws
        )
    low, high = {}, {}
    for name, samples in zip(statistics, resampled, strict=True):
        # A resample may leave a statistic undefined (one system left, a constant score).
        finite = samples[np.isfinite(samples)]
        low[name], high[name] = percentile_interval(finite) if finite.size else (np.nan, np.nan)
    return low, high


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


@dataclass(frozen=True)
class MetricColumns:
    """What meta-evaluation needs to know of the configured metrics."""

    columns: list[str]
    """Their per-sentence score columns."""
    lower_is_better: frozenset[str]
    reference_free: set[str]
    """Columns computed without the reference (named `-src` in MTME's layout)."""


def scored_columns(metric_names: Sequence[str], config: Mapping[str, object]) -> MetricColumns:
    """The one place where meta-evaluation reads the metric registry."""
    metrics = load_metrics(metric_names, dict(config))
    return MetricColumns(
        score_columns(metrics), lower_is_better_columns(metrics), reference_free_columns(metrics)
    )
