"""Confidence intervals and paired significance tests over per-sentence scores.

The definitions follow sacreBLEU's: a 95% interval from the 2.5th and 97.5th percentiles of
bootstrap resamples; paired bootstrap resampling (Koehn 2004) and paired approximate
randomization, both with p = (c + 1) / (trials + 1). Every system score here is a mean of
per-sentence scores, so resampling the per-sentence scores is resampling the sufficient
statistics: nothing is re-scored.

One difference from sacreBLEU 2.6: c counts the trials whose statistic is at least as extreme
as the observed one, ties included, as the test's standard definition (Noreen 1989; Riezler and
Maxwell 2005) has it. sacreBLEU counts only those strictly beyond, which gives a system
compared with itself p = 1 / (trials + 1), "significant"; here it gets p = 1.

A direction's random draws depend only on the seed and its number of sentences, so results do
not depend on which other directions are evaluated or in which order. Directions of one size
share their draws, so pooled statistics resample sentence positions across directions jointly
(docs/results.md, "The draws").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeAlias

import numpy as np

Scores: TypeAlias = Sequence[float] | np.ndarray
"""A direction's sentence scores, as a list or a numpy vector."""

DEFAULT_SEED = 12345
DEFAULT_RESAMPLES = 1000
DEFAULT_TRIALS = 10000


@dataclass(frozen=True)
class Resampling:
    seed: int = DEFAULT_SEED
    bootstrap_resamples: int = DEFAULT_RESAMPLES
    ar_trials: int = DEFAULT_TRIALS

    def signature(self) -> str:
        return f"ci:95|bs:{self.bootstrap_resamples}|ar:{self.ar_trials}|seed:{self.seed}"

    def bootstrap_weights(self, size: int) -> np.ndarray:
        """(resamples, size) matrix: how often each sentence is drawn in each resample."""
        return _bootstrap_weights(self.seed, self.bootstrap_resamples, size)

    def swap_masks(self, size: int) -> np.ndarray:
        """(trials, size) matrix of 1.0 where a trial swaps the two systems' outputs."""
        return _swap_masks(self.seed, self.ar_trials, size)


# Directions mostly share one size, so the draws are computed once and reused; the cache is
# small because an AR matrix for 854 sentences already takes 68 MB.
@lru_cache(maxsize=2)
def _bootstrap_weights(seed: int, resamples: int, size: int) -> np.ndarray:
    rng = np.random.default_rng([seed, size])
    draws = rng.integers(size, size=(resamples, size))
    cells = (draws + size * np.arange(resamples)[:, None]).ravel()
    counts = np.bincount(cells, minlength=resamples * size)
    return counts.reshape(resamples, size).astype(np.float64)


@lru_cache(maxsize=2)
def _swap_masks(seed: int, trials: int, size: int) -> np.ndarray:
    rng = np.random.default_rng([seed, size, 1])
    return rng.integers(2, size=(trials, size)).astype(np.float64)


def percentile_interval(samples: np.ndarray) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles as sacreBLEU picks them (index n // 40 from each end)."""
    ordered = np.sort(samples)
    lower = len(ordered) // 40
    return float(ordered[lower]), float(ordered[len(ordered) - lower - 1])


RESAMPLED_BLOCK = 64
"""Vectors per matrix product of `bootstrap_mean_matrix`: every product has this shape."""


def bootstrap_mean_matrix(vectors: Sequence[Scores], resampling: Resampling) -> np.ndarray:
    """Row i: the mean of each bootstrap resample of vectors[i], NaN left out.

    A row is NaN where a vector has no finite value. Vectors with the same number of finite
    values share their draws, which are made once per size here, whatever the order of the
    vectors (missing values scattered over many directions make many sizes). Their resample
    means are matrix products of `RESAMPLED_BLOCK` vectors at a time (a block filled up with
    zeros), one product shape for every vector, so that a vector's row is the same to the last
    bit whichever vectors share its block, and whether it is alone: a product of many vectors
    reads the draws once where a product per vector read them once each (10x faster at
    BOUQuET's 854 sentences).
    """
    finite = [_finite(np.asarray(values, dtype=np.float64)) for values in vectors]
    means = np.full((len(finite), resampling.bootstrap_resamples), np.nan)
    by_size: dict[int, list[int]] = defaultdict(list)
    for index, values in enumerate(finite):
        if values.size:
            by_size[values.size].append(index)
    for size, indices in by_size.items():
        weights = resampling.bootstrap_weights(size)
        block = np.zeros((RESAMPLED_BLOCK, size))
        for start in range(0, len(indices), RESAMPLED_BLOCK):
            chosen = indices[start : start + RESAMPLED_BLOCK]
            block[: len(chosen)] = [finite[index] for index in chosen]
            block[len(chosen) :] = 0.0
            means[chosen] = (block @ weights.T)[: len(chosen)] / size
    return means


def percentile_intervals(resampled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`percentile_interval` of every row; NaN for a row of NaN."""
    ordered = np.sort(resampled, axis=1)
    lower = resampled.shape[1] // 40
    return ordered[:, lower], ordered[:, resampled.shape[1] - lower - 1]


def bootstrap_interval(values: Scores, resampling: Resampling) -> tuple[float, float]:
    """95% bootstrap interval of the mean; missing values (NaN) are left out."""
    low, high = percentile_intervals(bootstrap_mean_matrix([values], resampling))
    return float(low[0]), float(high[0])


def macro_bootstrap_interval(
    per_direction: Sequence[Scores], resampling: Resampling
) -> tuple[float, float]:
    """95% interval of the macro mean over directions (the mean of the direction means).

    Sentences are resampled within each direction (a stratified bootstrap), the same draws as
    each direction's own interval; a direction without any finite score is left out, as it is
    left out of the macro mean.
    """
    return macro_interval(bootstrap_mean_matrix(per_direction, resampling))


def macro_interval(direction_resamples: np.ndarray) -> tuple[float, float]:
    """`macro_bootstrap_interval` from the directions' rows of a `bootstrap_mean_matrix`."""
    return macro_resamples_interval(macro_resamples(direction_resamples))


def macro_resamples(direction_resamples: np.ndarray) -> np.ndarray:
    """Each resample's macro mean over the directions of a `bootstrap_mean_matrix` that have
    every resample (none where no direction has)."""
    usable = direction_resamples[~np.isnan(direction_resamples).any(axis=1)]
    if not len(usable):
        return np.empty(0)
    return usable.mean(axis=0)


def macro_resamples_interval(macro: np.ndarray) -> tuple[float, float]:
    """`macro_interval` from its `macro_resamples`."""
    if not len(macro):
        return float("nan"), float("nan")
    return percentile_interval(macro)


def skipna_mean(values: np.ndarray) -> float:
    """The mean of the values that are not NaN, summed as pandas sums them (NaN as 0), so that
    it is pandas' `Series.mean()` to the last bit."""
    missing = np.isnan(values)
    count = values.size - int(missing.sum())
    return float(np.where(missing, 0.0, values).sum() / count) if count else float("nan")


@dataclass(frozen=True)
class PairedSamples:
    """One direction's paired comparison, kept so that an overall test can pool directions."""

    baseline_mean: float
    system_mean: float
    n_sentences: int
    bootstrap_deltas: np.ndarray
    """Per resample: system mean - baseline mean."""
    ar_deltas: np.ndarray
    """Per trial: the mean difference after randomly swapping outputs."""

    @property
    def delta(self) -> float:
        return self.system_mean - self.baseline_mean


def paired_samples(baseline: Scores, system: Scores, resampling: Resampling) -> PairedSamples:
    """Resample one direction's paired per-sentence scores (sentences missing in either drop)."""
    a, b = _scored_in_both(baseline, system)
    size = a.size
    if size == 0:
        empty = np.full(1, np.nan)
        return PairedSamples(float("nan"), float("nan"), 0, empty, empty)
    difference = b - a
    bootstrap_deltas = resampling.bootstrap_weights(size) @ difference / size
    # A swapped sentence contributes -difference instead of +difference.
    swaps = resampling.swap_masks(size)
    ar_deltas = (difference.sum() - 2.0 * (swaps @ difference)) / size
    return PairedSamples(float(a.mean()), float(b.mean()), size, bootstrap_deltas, ar_deltas)


def paired_samples_of(
    pairs: Sequence[tuple[Scores, Scores]], resampling: Resampling
) -> list[PairedSamples]:
    """`paired_samples` of every (baseline, system) pair, in the order given.

    The pairs with the same number of sentences scored in both are resampled together, one
    matrix product for all of them, with the draws of that size made once; means and deltas
    are those of `paired_samples`, and the resampled deltas agree with it to the last bits of
    a sum taken in another order (which `TIE_TOLERANCE` absorbs in the p-values).
    """
    usable = [_scored_in_both(baseline, system) for baseline, system in pairs]
    by_size: dict[int, list[int]] = defaultdict(list)
    for index, (baseline, _) in enumerate(usable):
        by_size[baseline.size].append(index)
    computed: dict[int, PairedSamples] = {}
    for size, indices in sorted(by_size.items()):
        if size == 0:
            computed |= {index: paired_samples(*usable[index], resampling) for index in indices}
            continue
        baseline = np.stack([usable[index][0] for index in indices])
        system = np.stack([usable[index][1] for index in indices])
        difference = system - baseline
        bootstrap = difference @ resampling.bootstrap_weights(size).T / size
        swapped = difference @ resampling.swap_masks(size).T
        randomized = (difference.sum(axis=1)[:, None] - 2.0 * swapped) / size
        for row, index in enumerate(indices):
            computed[index] = PairedSamples(
                float(baseline[row].mean()),
                float(system[row].mean()),
                size,
                bootstrap[row],
                randomized[row],
            )
    return [computed[index] for index in range(len(usable))]


def _scored_in_both(baseline: Scores, system: Scores) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(system, dtype=np.float64)
    keep = np.isfinite(a) & np.isfinite(b)
    return a[keep], b[keep]


def pool(directions: Sequence[PairedSamples]) -> PairedSamples:
    """The macro average over directions, resampled within each direction (stratified)."""
    usable = [d for d in directions if d.n_sentences]
    if not usable:
        empty = np.full(1, np.nan)
        return PairedSamples(float("nan"), float("nan"), 0, empty, empty)
    return PairedSamples(
        float(np.mean([d.baseline_mean for d in usable])),
        float(np.mean([d.system_mean for d in usable])),
        sum(d.n_sentences for d in usable),
        np.mean([d.bootstrap_deltas for d in usable], axis=0),
        np.mean([d.ar_deltas for d in usable], axis=0),
    )


def paired_bootstrap_p(samples: PairedSamples) -> float:
    """Paired bootstrap p-value: resampled |delta|, centred, at least as far as the real one."""
    if samples.n_sentences == 0:
        return float("nan")
    (p,) = bootstrap_p_values(samples.bootstrap_deltas[None, :], np.array([samples.delta]))
    return float(p)


def approximate_randomization_p(samples: PairedSamples) -> float:
    """Paired approximate randomization p-value: swapped |delta| at least the real one."""
    if samples.n_sentences == 0:
        return float("nan")
    (p,) = randomization_p_values(samples.ar_deltas[None, :], np.array([samples.delta]))
    return float(p)


def bootstrap_p_values(bootstrap_deltas: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """`paired_bootstrap_p` of every row of a (tests, resamples) matrix of resampled deltas
    against its observed delta; NaN where the delta is."""
    absolute = np.abs(bootstrap_deltas)
    return _p_values(absolute - absolute.mean(axis=1, keepdims=True), np.abs(deltas))


def randomization_p_values(ar_deltas: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """`approximate_randomization_p` of every row of a (tests, trials) matrix."""
    return _p_values(np.abs(ar_deltas), np.abs(deltas))


TIE_TOLERANCE = 1e-9
"""Statistics closer than this (relative to the largest one) count as tied: a trial that
reproduces the observed difference sums the same numbers in another order."""


def _p_values(statistics: np.ndarray, real: np.ndarray) -> np.ndarray:
    # At least as extreme, ties included: no trial may count as evidence against a difference
    # of zero, so a system compared with itself gets p = 1.
    p = np.full(real.shape, np.nan)
    known = ~np.isnan(real)
    statistics, real = statistics[known], real[known]
    if real.size:
        tolerance = TIE_TOLERANCE * np.maximum(real, np.abs(statistics).max(axis=1))
        extreme = np.sum(statistics >= (real - tolerance)[:, None], axis=1)
        p[known] = (extreme + 1) / (statistics.shape[1] + 1)
    return p


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def benjamini_hochberg(p_values: Scores) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (false discovery rate), NaN kept and not counted.

    The adjusted value of the i-th smallest of m p-values is min over j >= i of p_(j) * m / j,
    capped at 1: a test is significant at level q after correction when its adjusted value is
    below q. Holm's family-wise correction would multiply the smallest p by m, and with
    1000 bootstrap resamples no p is below 1/1001: over BOUQuET's ~1062 directions nothing
    could ever be significant, so the false discovery rate is the useful guarantee here.
    """
    values = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full(values.shape, np.nan)
    present = np.flatnonzero(~np.isnan(values))
    if not present.size:
        return adjusted
    order = present[np.argsort(values[present], kind="stable")]
    ranks = np.arange(1, order.size + 1)
    scaled = values[order] * order.size / ranks
    adjusted[order] = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    return adjusted
