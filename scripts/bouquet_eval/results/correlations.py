"""correlations.csv: each metric's agreement with people, per direction and pooled.

One row per scope and metric. The scopes: every judged direction, then the pools `all`,
`into_english`, `out_of_english` and `without_english` (directions with eng_Latn as target, as
source, as neither), then the
directions inside and outside each learned metric's training languages. Each
statistic of `agreement.Agreement` has a 95% bootstrap interval: the items (source segments)
of each direction are drawn with replacement, `statistics.bootstrap_resamples` times, with
the project's draws (`stats.Resampling`), a pool drawing within each of its directions
(stratified), so a direction's draws are the same alone and in a pool.

Each learned metric (one whose model's training languages its record names) adds two scopes,
`training` `inside:<column>` and `outside:<column>`: the directions whose languages its model
was trained on (the target language; the source language too when it reads no reference), and
the others, every metric's agreement computed over each; learned metrics whose models saw the
same directions share them (`inside:<column>,<column>`). Per direction, its rows say whether
the learned metric's model saw the direction's languages (`trained_on_languages`).

In each scope, the metric with the highest `metaeval.decide_by` statistic is the best; it is
tested against every other metric with a paired permutation test over segments
(`permutation.permutation_tests`, every test at once), and the p-values of all tests of the
run are corrected together with Benjamini-Hochberg (`stats.benjamini_hochberg`), as the
leaderboard's are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from bouquet_eval.core.stats import Resampling, benjamini_hochberg, percentile_interval
from bouquet_eval.data.dataset import Direction
from bouquet_eval.data.outputs import scored_path
from bouquet_eval.metrics.records import MetricSet
from bouquet_eval.results.aggregate import ENGLISH_GROUPS, english_groups
from bouquet_eval.results.agreement import Agreement, agreement, run_starts
from bouquet_eval.results.permutation import PairedTest, permutation_tests
from bouquet_eval.results.weighted_agreement import Mapper, scope_statistics

POOLS = ("all", *ENGLISH_GROUPS)
TRAINING = "training"
"""The scope of the directions inside (or outside) a learned metric's training languages."""
INSIDE, OUTSIDE = "inside", "outside"


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


def scopes(
    table: pd.DataFrame, trained: Mapping[str, np.ndarray] | None = None
) -> list[tuple[str, str, np.ndarray]]:
    """(kind, name, row mask) of every direction, sorted, then of every non-empty pool, then
    of the directions inside and outside each learned metric's training languages."""
    direction = table["src_lang"] + "-" + table["tgt_lang"]
    found = [
        ("direction", name, (direction == name).to_numpy()) for name in sorted(direction.unique())
    ]
    pools = {
        "all": np.ones(len(table), bool),
        **{name: rows.to_numpy() for name, rows in english_groups(table).items()},
    }
    found += [("pooled", name, mask) for name, mask in pools.items() if mask.any()]
    # Learned metrics whose models saw the same directions share their scopes.
    sharing: dict[bytes, list[str]] = {}
    for column, inside in (trained or {}).items():
        sharing.setdefault(np.packbits(inside).tobytes(), []).append(column)
    for columns in sharing.values():
        inside = (trained or {})[columns[0]]
        for where, mask in ((INSIDE, inside), (OUTSIDE, ~inside)):
            if mask.any():
                found.append((TRAINING, f"{where}:{','.join(columns)}", mask))
    return found


def codes(values: pd.Series) -> np.ndarray:
    return pd.factorize(values, sort=True)[0]


def correlations(
    table: pd.DataFrame,
    scores: Mapping[str, np.ndarray],
    settings: Settings,
    trained: Mapping[str, np.ndarray] | None = None,
    workers: int = 1,
) -> pd.DataFrame:
    """The rows of correlations.csv for the checked judgements `table` and every metric's
    oriented per-row `scores` (aligned with the table's rows); `trained`: per learned metric's
    column, whether its model was trained on each row's languages (`MetricColumns.trained`).
    `workers` threads compute the bootstrap resamples and the permutation trials (numpy runs
    their passes without Python's lock), batch by batch; the numbers do not depend on them."""
    trained = dict(trained or {})
    with ThreadPoolExecutor(workers) as pool:
        return _correlations(table, scores, settings, trained, pool.map if workers > 1 else map)


def _correlations(
    table: pd.DataFrame,
    scores: Mapping[str, np.ndarray],
    settings: Settings,
    trained: Mapping[str, np.ndarray],
    mapper: Mapper,
) -> pd.DataFrame:
    direction = table["src_lang"] + "-" + table["tgt_lang"]
    # Item codes sorted by direction first, so that a direction's items are contiguous.
    items = codes(direction + "\t" + table["segment"])
    systems = codes(table["system"])
    groups = codes(direction)
    human = table["human"].to_numpy(float)
    resampling = Resampling(seed=settings.seed, bootstrap_resamples=settings.bootstrap_resamples)
    found = scopes(table, trained)
    usable: dict[str, list[np.ndarray]] = {}
    measured: dict[str, list[dict[str, object]]] = {}
    for metric, values in scores.items():
        finite = np.isfinite(values)
        usable[metric] = [np.flatnonzero(mask & finite) for _, _, mask in found]
        low, high = _intervals(
            human, values, items, systems, groups, usable[metric], resampling, mapper
        )
        measured[metric] = []
        for rows, scope_low, scope_high in zip(usable[metric], low, high, strict=True):
            observed = agreement(
                human[rows], values[rows], items[rows], systems[rows], groups[rows]
            )
            intervals = {
                f"{name}_{side}": bounds[name]
                for name in Agreement.statistics()
                for side, bounds in (("low", scope_low), ("high", scope_high))
            }
            measured[metric].append({**asdict(observed), **intervals})
    records = []
    for position, (kind, name, mask) in enumerate(found):
        for metric in scores:
            seen = pd.NA
            if kind == "direction" and metric in trained:
                seen = bool(trained[metric][np.flatnonzero(mask)[0]])
            records.append(
                {
                    "scope": kind,
                    "name": name,
                    "src_lang": name.split("-")[0] if kind == "direction" else "",
                    "tgt_lang": name.split("-")[1] if kind == "direction" else "",
                    "metric": metric,
                    **measured[metric][position],
                    "trained_on_languages": seen,
                }
            )
    tests = _best_against_others(records, human, scores, items, usable, settings, mapper)
    frame = pd.DataFrame(records)
    frame["trained_on_languages"] = frame["trained_on_languages"].astype("boolean")
    best = np.zeros(len(frame), bool)
    best[_best_positions(records, settings.decide_by)] = True
    p_values, adjusted = np.full(len(frame), np.nan), np.full(len(frame), np.nan)
    significant = pd.array([pd.NA] * len(frame), dtype="boolean")
    if tests:
        tested = np.array([position for position, _ in tests])
        p_values[tested] = [p for _, p in tests]
        adjusted[tested] = benjamini_hochberg(p_values[tested])
        significant[tested] = adjusted[tested] < settings.significance
    frame["best"] = best
    frame["p_vs_best"] = p_values
    frame["p_vs_best_adjusted"] = adjusted
    frame["best_significantly_better"] = significant
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
    records: Sequence[Mapping[str, object]],
    human: np.ndarray,
    scores: Mapping[str, np.ndarray],
    items: np.ndarray,
    usable: Mapping[str, Sequence[np.ndarray]],
    settings: Settings,
    mapper: Mapper,
) -> list[tuple[int, float]]:
    """(record position, p) of the best metric of each scope against each other metric: the
    records list the metrics of each scope in turn, scope after scope."""
    statistic = settings.decide_by
    positions, tests = [], []
    for scope, first in enumerate(range(0, len(records), len(scores))):
        scope_records = records[first : first + len(scores)]
        values = {str(r["metric"]): float(r[statistic]) for r in scope_records}  # type: ignore[arg-type]
        finite = {m: v for m, v in values.items() if np.isfinite(v)}
        if len(finite) < 2:
            continue
        best = str(max(finite, key=lambda m: finite[m]))
        for offset, other in enumerate(values):
            if other == best:
                continue
            rows = np.intersect1d(usable[best][scope], usable[other][scope])
            positions.append(first + offset)
            pair = (scores[best][rows], scores[other][rows])
            tests.append(PairedTest(human[rows], *pair, items[rows]))
    trials = settings.permutation_trials
    results = permutation_tests(statistic, tests, settings.seed, trials, mapper)
    return [(position, p) for position, (_, p) in zip(positions, results, strict=True)]


def _intervals(
    human: np.ndarray,
    metric: np.ndarray,
    items: np.ndarray,
    systems: np.ndarray,
    groups: np.ndarray,
    scope_rows: Sequence[np.ndarray],
    resampling: Resampling,
    mapper: Mapper,
) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """95% bootstrap intervals of every statistic of each scope (its rows), items drawn within
    directions: a direction's draws are the same alone and in a pool."""
    statistics = Agreement.statistics()
    resamples = resampling.bootstrap_resamples
    present = [position for position, rows in enumerate(scope_rows) if rows.size]
    resampled = np.full((len(statistics), len(scope_rows), resamples), np.nan)
    if present:
        rows = np.unique(np.concatenate([scope_rows[position] for position in present]))
        # Items 0..K-1 in the order of their codes, a direction's items contiguous.
        columns = np.unique(items[rows], return_inverse=True)[1]
        item_groups = np.zeros(columns.max() + 1, np.int64)
        item_groups[columns] = groups[rows]
        draws = _StratifiedDraws(item_groups, resampling)
        local = np.full(human.size, -1)
        local[rows] = np.arange(rows.size)
        resampled[:, present] = scope_statistics(
            human[rows],
            metric[rows],
            columns,
            systems[rows],
            groups[rows],
            [local[scope_rows[position]] for position in present],
            draws.chunk,
            resamples,
            mapper,
        )
    low: list[dict[str, float]] = [{} for _ in scope_rows]
    high: list[dict[str, float]] = [{} for _ in scope_rows]
    for position in range(len(scope_rows)):
        for name, samples in zip(statistics, resampled[:, position], strict=True):
            # A resample may leave a statistic undefined (one system left, a constant score).
            finite = samples[np.isfinite(samples)]
            interval = percentile_interval(finite) if finite.size else (np.nan, np.nan)
            low[position][name], high[position][name] = interval
    return low, high


class _StratifiedDraws:
    """The bootstrap draws of items 0..K-1, each direction's items drawn together
    (`Resampling.bootstrap_weights` of its size), a chunk of resamples and items at a time."""

    def __init__(self, item_groups: np.ndarray, resampling: Resampling) -> None:
        starts = run_starts(item_groups)
        sizes = np.diff(np.r_[starts, item_groups.size])
        self.size = np.repeat(sizes, sizes)
        self.offset = np.arange(item_groups.size) - np.repeat(starts, sizes)
        self.weights = {
            int(size): resampling.bootstrap_weights(int(size)).astype(np.int32)
            for size in np.unique(sizes)
        }

    def chunk(self, start: int, stop: int, items: np.ndarray) -> np.ndarray:
        drawn = np.empty((stop - start, items.size), np.int32)
        sizes = self.size[items]
        for size, weights in self.weights.items():
            wanted = sizes == size
            drawn[:, wanted] = np.take(weights[start:stop], self.offset[items[wanted]], axis=1)
        return drawn


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
    """What meta-evaluation needs to know of the configured metrics, from their records."""

    metrics: MetricSet

    @property
    def columns(self) -> list[str]:
        """Their per-sentence score columns."""
        return self.metrics.score_columns()

    @property
    def lower_is_better(self) -> frozenset[str]:
        return self.metrics.lower_is_better()

    @property
    def reference_free(self) -> set[str]:
        """Columns computed without the reference (named `-src` in MTME's layout)."""
        return self.metrics.reference_free_columns()

    def trained(self, table: pd.DataFrame) -> dict[str, np.ndarray]:
        """Per score column of a learned metric: for each row of `table`, whether its model
        was trained on the row's target language (and source language, reference-free)."""
        directions = table[["src_lang", "tgt_lang"]].drop_duplicates()
        per_direction = {
            (src, tgt): self.metrics.trained_columns(src, tgt)
            for src, tgt in directions.itertuples(index=False)
        }
        keys = list(zip(table["src_lang"], table["tgt_lang"], strict=True))
        learned = {column for trained in per_direction.values() for column in trained}
        return {
            column: np.array([per_direction[key][column] for key in keys], bool)
            for column in self.columns
            if column in learned
        }


def scored_columns(metric_names: Sequence[str], config: Mapping[str, object]) -> MetricColumns:
    """The one place where meta-evaluation reads the metric records."""
    return MetricColumns(MetricSet.of(metric_names, dict(config)))
