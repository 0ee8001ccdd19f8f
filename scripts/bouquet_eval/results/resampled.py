"""Each model's bootstrap resamples, made once by its aggregation and kept beside its scores.

A model's resampled statistics are, per score column and direction, the means of the 1000
bootstrap resamples of its sentence scores (`stats.bootstrap_mean_matrix`: the draws depend
only on the seed and the number of sentences, so every model shares them). The leaderboard and
the report read them instead of resampling every model again for every pair: a macro interval
averages a model's rows, and a paired bootstrap of two models is the difference of their rows,
since resample means are linear (W b / n - W a / n = W (b - a) / n). That holds where both
models scored the same sentences in the same order: `sentences` keeps a digest of those per
direction, and pairs that differ are tested from their rows (`leaderboard.paired_p_value`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bouquet_eval.core.io import write_atomically
from bouquet_eval.core.stats import (
    bootstrap_p_values,
    macro_resamples,
    macro_resamples_interval,
)

RESAMPLED_FILE = "resampled.npz"


def sentences_digest(uniq_ids: Sequence[str] | np.ndarray) -> str:
    """A digest of the ordered ids of a direction's scored sentences."""
    texts = uniq_ids.tolist() if isinstance(uniq_ids, np.ndarray) else uniq_ids
    joined = "\x1f".join(map(str, texts))
    return hashlib.blake2b(joined.encode("utf-8"), digest_size=8).hexdigest()


@dataclass(frozen=True)
class ResampledScores:
    """One model's statistics per score column, rows aligned with `directions` (sorted)."""

    directions: list[tuple[str, str]]
    statistics: str
    """The `Resampling.signature()` they were drawn with."""
    means: Mapping[str, np.ndarray]
    """Per column, each direction's mean of its scored sentences (NaN without any)."""
    resamples: Mapping[str, np.ndarray]
    """Per column, (directions, resamples): each direction's bootstrap resample means."""
    sentences: Mapping[str, np.ndarray]
    """Per column, each direction's `sentences_digest` of the sentences it has a score for."""
    macro: Mapping[str, np.ndarray] = field(default_factory=dict)
    """Per column, its `stats.macro_resamples`, where made before (the file keeps them, so
    that a leaderboard's intervals read 1000 numbers a column, not `resamples`)."""

    def write(self, path: Path) -> None:
        arrays: dict[str, Any] = {
            "src_lang": np.array([s for s, _ in self.directions], dtype=str),
            "tgt_lang": np.array([t for _, t in self.directions], dtype=str),
            "statistics": np.array(self.statistics),
        }
        for column in self.means:
            arrays[f"means:{column}"] = self.means[column]
            arrays[f"resamples:{column}"] = self.resamples[column]
            arrays[f"sentences:{column}"] = np.asarray(self.sentences[column], dtype=str)
            arrays[f"macro:{column}"] = self.macro_of(column)

        def write(temporary: Path) -> None:
            with temporary.open("wb") as stream:
                np.savez(stream, **arrays)

        write_atomically(path, write)

    @classmethod
    def read(cls, path: Path, expected_statistics: str) -> ResampledScores:
        # Before reading: the resamples read later must come from the file read now.
        version = StoredResamples.version_of(path)
        with np.load(path, allow_pickle=False) as stored:
            statistics = str(stored["statistics"])
            if statistics != expected_statistics:
                raise ValueError(
                    f"{path}: resampled with '{statistics}', the configuration asks for "
                    f"'{expected_statistics}': aggregate the model again"
                )
            columns = [key.split(":", 1)[1] for key in stored.files if key.startswith("means:")]
            return cls(
                directions=list(
                    zip(stored["src_lang"].tolist(), stored["tgt_lang"].tolist(), strict=True)
                ),
                statistics=statistics,
                means={c: stored[f"means:{c}"] for c in columns},
                resamples=StoredResamples(path, columns, version),
                sentences={c: stored[f"sentences:{c}"] for c in columns},
                # Files written before they were kept have none.
                macro={c: stored[f"macro:{c}"] for c in columns if f"macro:{c}" in stored},
            )

    def macro_of(self, column: str) -> np.ndarray:
        """The column's `stats.macro_resamples`."""
        if column in self.macro:
            return self.macro[column]
        return macro_resamples(self.resamples[column])

    def interval(self, column: str) -> tuple[float, float]:
        """The 95% interval of the macro mean over directions (`stats.macro_interval`)."""
        if column not in self.means:
            return float("nan"), float("nan")
        return macro_resamples_interval(self.macro_of(column))

    def pairs_with(self, other: ResampledScores, column: str) -> bool:
        """Whether both scored the same sentences, in the same order, in every direction."""
        return (
            column in self.sentences
            and column in other.sentences
            and self.directions == other.directions
            and self.statistics == other.statistics
            and bool(np.array_equal(self.sentences[column], other.sentences[column]))
        )


class StoredResamples(Mapping[str, np.ndarray]):
    """A resampled.npz's `resamples` by column, each read from the file when first asked
    for: 8 MB a column at BOUQuET's size, which a leaderboard reads of its primary metric only."""

    def __init__(self, path: Path, columns: Sequence[str], version: tuple[int, int]) -> None:
        """`version`: the file's `version_of` when the rest of it was read."""
        self.path, self.columns, self.version = path, list(columns), version
        self.read: dict[str, np.ndarray] = {}

    @staticmethod
    def version_of(path: Path) -> tuple[int, int]:
        status = path.stat()
        return status.st_mtime_ns, status.st_size

    def __getitem__(self, column: str) -> np.ndarray:
        if column not in self.read:
            if column not in self.columns:
                raise KeyError(column)
            if self.version_of(self.path) != self.version:
                raise RuntimeError(f"{self.path} was written again while it was being read")
            with np.load(self.path, allow_pickle=False) as stored:
                self.read[column] = stored[f"resamples:{column}"]
        return self.read[column]

    def __contains__(self, column: object) -> bool:
        # Mapping's own would read the column to answer.
        return column in self.columns

    def __iter__(self) -> Iterator[str]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)


@dataclass(frozen=True)
class PairedBootstrap:
    """A paired bootstrap of a system against a baseline on one column."""

    delta: np.ndarray
    """Per direction: system mean - baseline mean (NaN where neither scored a sentence)."""
    p_values: np.ndarray
    """Per direction: the paired bootstrap p-value (`stats.paired_bootstrap_p`)."""
    pooled_delta: float
    """The difference of the macro means over the directions with scores."""
    pooled_p: float
    """The paired bootstrap p-value of that difference, resampled within directions."""


def paired_bootstrap(
    baseline: ResampledScores, system: ResampledScores, column: str
) -> PairedBootstrap:
    """Every direction's paired bootstrap and the pooled one, from the two models' resamples;
    they must pair (`ResampledScores.pairs_with`)."""
    deltas, delta = _paired_deltas(baseline, system, column)
    pooled_delta, pooled_p = _pooled(baseline, system, column, deltas, delta)
    return PairedBootstrap(delta, bootstrap_p_values(deltas, delta), pooled_delta, pooled_p)


def pooled_paired_p(baseline: ResampledScores, system: ResampledScores, column: str) -> float:
    """`paired_bootstrap`'s `pooled_p` alone (a leaderboard's test), without every
    direction's."""
    return _pooled(baseline, system, column, *_paired_deltas(baseline, system, column))[1]


def _paired_deltas(
    baseline: ResampledScores, system: ResampledScores, column: str
) -> tuple[np.ndarray, np.ndarray]:
    """The resampled and observed differences per direction of two models that pair."""
    if not baseline.pairs_with(system, column):
        raise ValueError(f"the models did not score the same sentences on {column}")
    return (
        system.resamples[column] - baseline.resamples[column],
        system.means[column] - baseline.means[column],
    )


def _pooled(
    baseline: ResampledScores,
    system: ResampledScores,
    column: str,
    deltas: np.ndarray,
    delta: np.ndarray,
) -> tuple[float, float]:
    """The difference of the macro means and its p-value, over the directions with scores."""
    usable = ~np.isnan(delta)
    if not usable.any():
        return float("nan"), float("nan")
    # Every direction usable (the rule): the same rows, without copying them.
    pooled = (deltas if usable.all() else deltas[usable]).mean(axis=0)
    pooled_delta = float(
        system.means[column][usable].mean() - baseline.means[column][usable].mean()
    )
    (pooled_p,) = bootstrap_p_values(pooled[None, :], np.array([pooled_delta]))
    return pooled_delta, float(pooled_p)


def distance_bootstrap_p(
    baseline: ResampledScores, system: ResampledScores, column: str, target: float
) -> float:
    """The bootstrap p-value of the difference between the two models' distances from
    `target` of their macro means over directions: each resample's macro means, drawn as the
    models' own (paired where they scored the same sentences, `pairs_with`), give its
    difference of distances."""
    if baseline.directions != system.directions or baseline.statistics != system.statistics:
        raise ValueError(f"the models were not resampled over the same directions on {column}")
    usable = ~np.isnan(baseline.means[column]) & ~np.isnan(system.means[column])
    if not usable.any():
        return float("nan")

    def distance(scores: ResampledScores) -> tuple[float, np.ndarray]:
        macro = float(scores.means[column][usable].mean())
        return abs(macro - target), np.abs(scores.resamples[column][usable].mean(axis=0) - target)

    (base, base_resampled), (mine, mine_resampled) = distance(baseline), distance(system)
    (p,) = bootstrap_p_values((mine_resampled - base_resampled)[None, :], np.array([mine - base]))
    return float(p)
