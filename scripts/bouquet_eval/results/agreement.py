"""Agreement between a metric's scores and human scores, the statistics MTME reports.

Segment level, over every judged translation of a set (flattened, no grouping): Pearson's r,
Spearman's rho (average ranks for ties) and Kendall's tau-b; and acc-eq, the pairwise accuracy
with tie calibration of Deutsch et al. (2023) that MTME computes for segment level: over the
pairs of translations of one source segment (an item) by two systems, the share the metric
orders as people do, a pair counting as tied by the metric when its scores differ by at most
epsilon and as tied by people when their scores are equal; epsilon is the one of the candidate
thresholds (0 and every difference of the metric within an item) that gives the highest
accuracy, the smallest on a tie. Pairs of all items of a set are pooled (micro average), so
that one epsilon serves a direction or a pool of directions.

System level, where a direction has at least three systems: each system's mean human and mean
metric score over its judged segments; Pearson's r across systems, and the pairwise accuracy
(MTME's): the share of system pairs whose two differences have the same sign. Pooled over
directions, the pairwise accuracy counts the pairs of every direction; Pearson's r is per
direction only.

Kendall's tau-b is computed in O(n log n) (inversions counted by a bottom-up merge, in numpy),
so that a pool of every direction's segments takes seconds, not hours. Every statistic is
tested equal to scipy.stats, or to a straightforward reference, on a synthetic table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_SYSTEMS = 3
"""A direction's system-level statistics need at least this many systems."""


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r; NaN for fewer than two values or a constant vector."""
    if x.size < 2:
        return float("nan")
    dx = x - x.mean()
    dy = y - y.mean()
    denominator = np.sqrt((dx @ dx) * (dy @ dy))
    return float((dx @ dy) / denominator) if denominator > 0 else float("nan")


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, tied values sharing the mean of their ranks (scipy's 'average')."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], ordered.size]
    group_rank = (starts + ends + 1) / 2.0
    ranks = np.empty(values.size)
    ranks[order] = np.repeat(group_rank, ends - starts)
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    return pearson(average_ranks(x), average_ranks(y))


def _tied_pairs(values: np.ndarray) -> int:
    _, counts = np.unique(values, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def _inversions(ranks: np.ndarray) -> int:
    """Pairs i < j with ranks[i] > ranks[j], by a bottom-up merge sort of blocks in numpy."""
    n = ranks.size
    values = ranks.astype(np.int64)
    positions = np.arange(n)
    total = 0
    width = 1
    while width < n:
        block = positions // (2 * width)
        in_right = (positions // width) % 2 == 1
        # Each block's halves are sorted; offsetting by the block keeps blocks apart in one
        # global search: for a right-half value, the left-half values above it are inversions.
        keys = values + block * (n + 1)
        left_keys = keys[~in_right]
        left_block_end = np.searchsorted(left_keys, (block[in_right] + 1) * (n + 1), "left")
        not_above = np.searchsorted(left_keys, keys[in_right], "right")
        total += int((left_block_end - not_above).sum())
        values = np.sort(keys) - block * (n + 1)  # merge: each block of 2 * width sorted
        width *= 2
    return total


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b; NaN where either vector is constant or has fewer than two values."""
    n = x.size
    if n < 2:
        return float("nan")
    pairs = n * (n - 1) // 2
    tied_x, tied_y = _tied_pairs(x), _tied_pairs(y)
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    changes = np.flatnonzero(np.r_[True, (xs[1:] != xs[:-1]) | (ys[1:] != ys[:-1]), True])
    runs = np.diff(changes)
    tied_both = int((runs * (runs - 1) // 2).sum())
    # Sorted by x then y: a pair tied in x is never an inversion, so inversions are exactly
    # the discordant pairs.
    discordant = _inversions(np.unique(y, return_inverse=True)[1][order])
    concordant = pairs - tied_x - tied_y + tied_both - discordant
    difference = concordant - discordant
    denominator = np.sqrt(float(pairs - tied_x) * float(pairs - tied_y))
    if denominator == 0:
        return float("nan")
    return float(difference / denominator)


def item_pairs(items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, second) positions of every pair of rows of one item."""
    grouped = Items.of(items)
    order, starts, sizes = grouped.order, grouped.starts, grouped.sizes
    firsts, seconds = [], []
    for size in np.unique(sizes[sizes > 1]):
        begin = starts[sizes == size]
        i, j = np.triu_indices(size, 1)
        firsts.append(order[(begin[:, None] + i).ravel()])
        seconds.append(order[(begin[:, None] + j).ravel()])
    if not firsts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(firsts), np.concatenate(seconds)


def acc_eq(human: np.ndarray, metric: np.ndarray, items: np.ndarray) -> tuple[float, float]:
    """(accuracy, epsilon) of tie-calibrated pairwise accuracy over the pairs within items."""
    first, second = item_pairs(items)
    if not first.size:
        return float("nan"), float("nan")
    human_delta = human[first] - human[second]
    metric_delta = metric[first] - metric[second]
    gap = np.abs(metric_delta)
    order = np.argsort(gap, kind="stable")
    gap = gap[order]
    tied_by_people = human_delta == 0
    same_order = np.sign(human_delta) == np.sign(metric_delta)
    human_tie = tied_by_people[order]
    agrees = (~tied_by_people & same_order & (metric_delta != 0))[order]
    # With epsilon = gap[k] (the last of equal gaps), pairs 0..k are tied by the metric: they
    # are right where people tie them too; the others where the metric orders them as people.
    last_of_gap = np.r_[gap[1:] != gap[:-1], True]
    tied_right = np.cumsum(human_tie)[last_of_gap]
    ordered_right = agrees.sum() - np.cumsum(agrees)[last_of_gap]
    correct = np.r_[agrees.sum(), tied_right + ordered_right]  # the first: epsilon below all
    thresholds = np.r_[-1.0, gap[last_of_gap]]
    # Epsilon is at least 0: "below all" only when no pair has a zero gap.
    usable = thresholds >= 0 if gap[0] == 0 else np.ones(thresholds.size, bool)
    best = int(np.flatnonzero(usable)[np.argmax(correct[usable])])
    return float(correct[best] / gap.size), float(max(thresholds[best], 0.0))


def system_means(values: np.ndarray, systems: np.ndarray, count: int) -> np.ndarray:
    """Per system code 0..count-1: the mean of its values."""
    sums = np.bincount(systems, weights=values, minlength=count)
    sizes = np.bincount(systems, minlength=count)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / sizes


def pairwise_accuracy(human: np.ndarray, metric: np.ndarray) -> tuple[int, int]:
    """(agreeing, all) system pairs: the two differences have the same sign."""
    i, j = np.triu_indices(human.size, 1)
    same = np.sign(human[i] - human[j]) == np.sign(metric[i] - metric[j])
    return int(same.sum()), int(i.size)


@dataclass(frozen=True)
class Agreement:
    """Every statistic of one metric over one set of judged translations."""

    n_segments: int
    n_systems: int
    pearson: float
    spearman: float
    kendall: float
    acc_eq: float
    acc_eq_epsilon: float
    system_pearson: float
    system_accuracy: float

    @staticmethod
    def statistics() -> tuple[str, ...]:
        """The statistics that have bootstrap intervals."""
        return ("pearson", "spearman", "kendall", "acc_eq", "system_pearson", "system_accuracy")


SEGMENT_STATISTICS = {
    "pearson": pearson,
    "spearman": spearman,
    "kendall": kendall_tau_b,
}


def segment_statistic(name: str, human: np.ndarray, metric: np.ndarray, items: np.ndarray) -> float:
    """One segment-level statistic by name (`metaeval.decide_by`)."""
    if name == "acc_eq":
        return acc_eq(human, metric, items)[0]
    return SEGMENT_STATISTICS[name](metric, human)


def agreement(
    human: np.ndarray,
    metric: np.ndarray,
    items: np.ndarray,
    systems: np.ndarray,
    groups: np.ndarray,
) -> Agreement:
    """The statistics of one metric over rows of judged translations.

    `items`: a code per source segment (unique across directions); `systems`: a code per
    system; `groups`: a code per direction, within which systems are compared.
    """
    accuracy, epsilon = acc_eq(human, metric, items)
    system_pearson, agreeing, compared = _system_level(human, metric, systems, groups)
    return Agreement(
        n_segments=int(human.size),
        n_systems=int(np.unique(systems).size),
        pearson=pearson(metric, human),
        spearman=spearman(metric, human),
        kendall=kendall_tau_b(metric, human),
        acc_eq=accuracy,
        acc_eq_epsilon=epsilon,
        system_pearson=system_pearson,
        system_accuracy=agreeing / compared if compared else float("nan"),
    )


def _system_level(
    human: np.ndarray, metric: np.ndarray, systems: np.ndarray, groups: np.ndarray
) -> tuple[float, int, int]:
    """System Pearson (one group only, else NaN) and the pooled pairwise accuracy counts."""
    group_codes = np.unique(groups)
    agreeing = compared = 0
    correlation = float("nan")
    for group in group_codes:
        inside = groups == group
        present, codes = np.unique(systems[inside], return_inverse=True)
        if present.size < MIN_SYSTEMS:
            continue
        human_means = system_means(human[inside], codes, present.size)
        metric_means = system_means(metric[inside], codes, present.size)
        right, pairs = pairwise_accuracy(human_means, metric_means)
        agreeing += right
        compared += pairs
        if group_codes.size == 1:
            correlation = pearson(metric_means, human_means)
    return correlation, agreeing, compared


@dataclass(frozen=True)
class Items:
    """Rows grouped by item: `order` lists the rows item by item, item k's rows being
    order[starts[k]:starts[k] + sizes[k]]; items are numbered in the order of their codes."""

    order: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray

    @classmethod
    def of(cls, items: np.ndarray) -> Items:
        order = np.argsort(items, kind="stable")
        ordered = items[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if items.size else order
        return cls(order, starts, np.diff(np.r_[starts, items.size]))

    def resample(self, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows of a resample drawing item k counts[k] times, and an item code per row:
        each copy of an item is an item of its own, so no pair joins two copies."""
        picked = np.repeat(np.arange(self.starts.size), counts.astype(np.int64))
        lengths = self.sizes[picked]
        ends = np.cumsum(lengths)
        within = np.arange(ends[-1] if ends.size else 0) - np.repeat(ends - lengths, lengths)
        rows = self.order[np.repeat(self.starts[picked], lengths) + within]
        return rows, np.repeat(np.arange(picked.size), lengths)


def swap_masks(seed: int, trials: int, size: int) -> np.ndarray:
    """(trials, size) booleans: where a permutation trial swaps the two metrics' scores."""
    rng = np.random.default_rng([seed, size, 3])
    return rng.integers(2, size=(trials, size)).astype(bool)


def standardized(values: np.ndarray) -> np.ndarray:
    """z-scores: swapping two metrics' scores needs them on one scale; no statistic changes."""
    spread = values.std()
    return (values - values.mean()) / spread if spread > 0 else values - values.mean()


def permutation_p(
    statistic: str,
    human: np.ndarray,
    best: np.ndarray,
    other: np.ndarray,
    items: np.ndarray,
    seed: int,
    trials: int,
) -> tuple[float, float]:
    """(delta, p): how much better `best` agrees than `other` by `statistic`, and the one-sided
    p-value of a paired permutation test over segments (MTME's PermutationSigDiff): each trial
    swaps the two metrics' standardized scores of a random half of the segments, and p is the
    share of trials, the observed one counted, whose difference is at least the observed."""
    a, b = standardized(best), standardized(other)
    observed = segment_statistic(statistic, human, a, items) - segment_statistic(
        statistic, human, b, items
    )
    if not np.isfinite(observed):
        return observed, float("nan")
    masks = swap_masks(seed, trials, human.size)
    at_least = 0
    tolerance = 1e-9 * max(abs(observed), 1.0)
    swapped_acc_eq = _SwappedAccEq(human, a, b, items) if statistic == "acc_eq" else None
    width = 4 * swapped_acc_eq.first.size if swapped_acc_eq else human.size
    step = max(1, TRIAL_CELLS // max(width, 1))
    for start in range(0, trials, step):
        mask = masks[start : start + step]
        if swapped_acc_eq is not None:
            delta = swapped_acc_eq.deltas(mask)
        else:
            delta = _trial_statistics(statistic, human, np.where(mask, b, a)) - _trial_statistics(
                statistic, human, np.where(mask, a, b)
            )
        at_least += int((delta >= observed - tolerance).sum())
    return observed, (at_least + 1) / (trials + 1)


TRIAL_CELLS = 4_000_000
"""Permutation trials are computed in chunks of about this many (trial, row) cells."""


def _trial_statistics(statistic: str, human: np.ndarray, metrics: np.ndarray) -> np.ndarray:
    """`segment_statistic` of each row of `metrics` (trials, rows) against `human`: Pearson and
    Spearman for all trials at once; Kendall's tau-b trial by trial."""
    if statistic == "kendall":
        return np.array([kendall_tau_b(row, human) for row in metrics])
    if statistic == "spearman":
        metrics, human = _rows_average_ranks(metrics), average_ranks(human)
    dx = metrics - metrics.mean(axis=1, keepdims=True)
    dy = human - human.mean()
    denominator = np.sqrt((dx * dx).sum(axis=1) * (dy @ dy))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (dx @ dy) / denominator
    return np.where((human.size >= 2) & (denominator > 0), r, np.nan)


def _rows_average_ranks(values: np.ndarray) -> np.ndarray:
    """`average_ranks` of each row."""
    order = np.argsort(values, axis=1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=1)
    n = values.shape[1]
    positions = np.broadcast_to(np.arange(n), values.shape)
    new_run = np.c_[np.ones((len(values), 1), bool), ordered[:, 1:] != ordered[:, :-1]]
    run_start = np.maximum.accumulate(np.where(new_run, positions, 0), axis=1)
    run_end = np.c_[new_run[:, 1:], np.ones((len(values), 1), bool)]
    # The end (exclusive) of each position's run: the next run's start, found from the right.
    ends = np.where(run_end, positions + 1, n)
    run_stop = np.minimum.accumulate(ends[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty(values.shape)
    np.put_along_axis(ranks, order, (run_start + run_stop + 1) / 2.0, axis=1)
    return ranks


class _SwappedAccEq:
    """acc-eq of the two metrics in many permutation trials, sorting once: a trial takes each
    score from one metric or the other, so the metric's difference over a pair is one of four
    candidates (first row's score from `a` or `b`, second row's the same), all sorted by gap
    once. A trial weighs each pair's candidate 1 and the others 0; the right pairs at each
    candidate epsilon are then cumulative sums, and the best count is the best over the
    candidates (one that a trial does not take counts as the one below it), as `acc_eq`'s."""

    def __init__(self, human: np.ndarray, a: np.ndarray, b: np.ndarray, items: np.ndarray):
        self.first, self.second = item_pairs(items)
        first, second = self.first, self.second
        human_delta = human[first] - human[second]
        # Candidate c (0..3): the first row's score from b where c >= 2, the second's where c
        # is odd; candidate c of pair p is column c * pairs + p.
        metric_delta = np.concatenate(
            [(b if c >= 2 else a)[first] - (b if c % 2 else a)[second] for c in range(4)]
        )
        human_delta = np.tile(human_delta, 4)
        gap = np.abs(metric_delta)
        order = np.argsort(gap, kind="stable")
        self.position = np.empty(order.size, np.int64)
        self.position[order] = np.arange(order.size)
        self.human_tie = (human_delta == 0)[order]
        same = np.sign(human_delta) == np.sign(metric_delta)
        self.agrees = ((human_delta != 0) & same & (metric_delta != 0))[order]
        sorted_gap = gap[order]
        self.last_of_gap = np.r_[sorted_gap[1:] != sorted_gap[:-1], True]

    def deltas(self, masks: np.ndarray) -> np.ndarray:
        """Per trial (row of `masks`): acc-eq of the swapped `a` minus that of swapped `b`."""
        pairs = self.first.size
        if not pairs:
            return np.full(len(masks), np.nan)
        candidate = 2 * masks[:, self.first].astype(np.int64) + masks[:, self.second]
        columns = candidate * pairs + np.arange(pairs)
        # Swapped b takes from each row the other metric's score: candidate 3 - c.
        return self._accuracy(columns) - self._accuracy((3 - candidate) * pairs + np.arange(pairs))

    def _accuracy(self, columns: np.ndarray) -> np.ndarray:
        taken = np.zeros((len(columns), self.position.size), bool)
        np.put_along_axis(taken, self.position[columns], True, axis=1)
        all_agreeing = (taken & self.agrees).sum(axis=1)
        # Right at epsilon: the ties people make too, up to it, and the agreeing pairs above.
        change = taken * (self.human_tie.astype(np.int8) - self.agrees)
        correct = np.cumsum(change, axis=1, dtype=np.int32)[:, self.last_of_gap]
        best = all_agreeing + correct.max(axis=1)
        return np.maximum(best, all_agreeing) / self.first.size
