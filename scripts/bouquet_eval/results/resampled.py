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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bouquet_eval.core.io import write_atomically
from bouquet_eval.core.stats import bootstrap_p_values, macro_interval

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

        def write(temporary: Path) -> None:
            with temporary.open("wb") as stream:
                np.savez(stream, **arrays)

        write_atomically(path, write)

    @classmethod
    def read(cls, path: Path, expected_statistics: str) -> ResampledScores:
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
                resamples={c: stored[f"resamples:{c}"] for c in columns},
                sentences={c: stored[f"sentences:{c}"] for c in columns},
            )

    def interval(self, column: str) -> tuple[float, float]:
        """The 95% interval of the macro mean over directions (`stats.macro_interval`)."""
        if column not in self.resamples:
            return float("nan"), float("nan")
        return macro_interval(self.resamples[column])

    def pairs_with(self, other: ResampledScores, column: str) -> bool:
        """Whether both scored the same sentences, in the same order, in every direction."""
        return (
            column in self.sentences
            and column in other.sentences
            and self.directions == other.directions
            and self.statistics == other.statistics
            and bool(np.array_equal(self.sentences[column], other.sentences[column]))
        )


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
    if not baseline.pairs_with(system, column):
        raise ValueError(f"the models did not score the same sentences on {column}")
    deltas = system.resamples[column] - baseline.resamples[column]
    delta = system.means[column] - baseline.means[column]
    usable = ~np.isnan(delta)
    if not usable.any():
        empty = np.full(len(delta), np.nan)
        return PairedBootstrap(delta, empty, float("nan"), float("nan"))
    pooled = deltas[usable].mean(axis=0)
    pooled_delta = float(
        system.means[column][usable].mean() - baseline.means[column][usable].mean()
    )
    (pooled_p,) = bootstrap_p_values(pooled[None, :], np.array([pooled_delta]))
    return PairedBootstrap(delta, bootstrap_p_values(deltas, delta), pooled_delta, pooled_p)


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
