"""Confidence intervals and paired significance tests over per-sentence scores.

The definitions follow sacreBLEU's: a 95% interval from the 2.5th and 97.5th percentiles of
bootstrap resamples; paired bootstrap resampling (Koehn 2004) and paired approximate
randomization, both with p = (c + 1) / (trials + 1). Every system score here is a mean of
per-sentence scores, so resampling the per-sentence scores is resampling the sufficient
statistics: nothing is re-scored.

A direction's random draws depend only on the seed and its number of sentences, so results do
not depend on which other directions are evaluated or in which order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

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


def bootstrap_means(values: Sequence[float], resampling: Resampling) -> np.ndarray | None:
    """The mean of each bootstrap resample of `values`, NaN left out; None when none is left."""
    finite = _finite(np.asarray(values, dtype=np.float64))
    if finite.size == 0:
        return None
    return resampling.bootstrap_weights(finite.size) @ finite / finite.size


def bootstrap_interval(values: Sequence[float], resampling: Resampling) -> tuple[float, float]:
    """95% bootstrap interval of the mean; missing values (NaN) are left out."""
    means = bootstrap_means(values, resampling)
    return (float("nan"), float("nan")) if means is None else percentile_interval(means)


def macro_bootstrap_interval(
    per_direction: Sequence[Sequence[float]], resampling: Resampling
) -> tuple[float, float]:
    """95% interval of the macro mean over directions (the mean of the direction means).

    Sentences are resampled within each direction (a stratified bootstrap), the same draws as
    each direction's own interval; a direction without any finite score is left out, as it is
    left out of the macro mean.
    """
    resampled = [bootstrap_means(values, resampling) for values in per_direction]
    usable = [means for means in resampled if means is not None]
    if not usable:
        return float("nan"), float("nan")
    return percentile_interval(np.mean(usable, axis=0))


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


def paired_samples(
    baseline: Sequence[float], system: Sequence[float], resampling: Resampling
) -> PairedSamples:
    """Resample one direction's paired per-sentence scores (sentences missing in either drop)."""
    a = np.asarray(baseline, dtype=np.float64)
    b = np.asarray(system, dtype=np.float64)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
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
    """sacreBLEU's paired bootstrap p-value: resampled |delta|, centred, beyond the real one."""
    if samples.n_sentences == 0:
        return float("nan")
    absolute = np.abs(samples.bootstrap_deltas)
    return _p_value(absolute - absolute.mean(), abs(samples.delta))


def approximate_randomization_p(samples: PairedSamples) -> float:
    """sacreBLEU's paired approximate randomization p-value."""
    if samples.n_sentences == 0:
        return float("nan")
    return _p_value(np.abs(samples.ar_deltas), abs(samples.delta))


def _p_value(statistics: np.ndarray, real: float) -> float:
    # Strictly greater: a system compared with itself must not look significant by chance.
    return float((np.sum(statistics > real) + 1) / (statistics.size + 1))


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]
