"""The statistics of `agreement` for many bootstrap resamples at once, in numpy.

A resample draws item k counts[k] times, so it holds each row of item k counts[k] times: every
statistic of the resample is the statistic of the original rows weighted by their item's count.
Weighted this way, each statistic is a few operations on a (resamples, rows) matrix, with the
sorts and pairings done once for all resamples:

- Pearson's r from weighted moments; Spearman's rho the same over weighted average ranks (the
  rows sorted once; a row's rank is the weight below it plus half of its tie group's).
- Kendall's tau-b from weighted pair counts: the pairs tied in x, in y and in both from the
  weights of each tie group (a row's copies are tied with each other in both), the discordant
  pairs by the bottom-up merge of `agreement._inversions`, whose comparisons do not depend on
  the weights, with cumulative weights in place of counts.
- acc-eq over the pairs within items, each weighted by its item's count; the best epsilon's
  accuracy is the best over the original candidates (one that no drawn pair makes gives the
  accuracy of the one below it).
- System means per direction and system from weighted sums; a system absent from a resample
  is left out as it is there.

The counts are integers, so pair counts and accuracies are exact; correlations equal the loop
over resampled rows to rounding (tests/test_metaeval.py compares them).
"""

from __future__ import annotations

import numpy as np

from bouquet_eval.results.agreement import MIN_SYSTEMS, Agreement, item_pairs

CHUNK_CELLS = 4_000_000
"""Resamples are processed in chunks of about this many (resample, row) cells."""


def resampled_statistics(
    human: np.ndarray,
    metric: np.ndarray,
    items: np.ndarray,
    systems: np.ndarray,
    groups: np.ndarray,
    draws: np.ndarray,
) -> np.ndarray:
    """(statistics, resamples): each statistic of `Agreement.statistics()` in each resample.

    `items` are codes 0..K-1 and `draws` is (resamples, K): how often each item is drawn."""
    statistics = Agreement.statistics()
    result = np.full((len(statistics), draws.shape[0]), np.nan)
    if not human.size:
        return result
    step = max(1, CHUNK_CELLS // max(human.size, 1))
    plan = _Plan(human, metric, items, systems, groups)
    for start in range(0, draws.shape[0], step):
        counts = draws[start : start + step]
        weights = counts[:, items]
        values = {
            "pearson": weighted_pearson(metric, human, weights),
            "spearman": weighted_pearson(
                plan.metric_ranks(weights), plan.human_ranks(weights), weights
            ),
            "kendall": plan.kendall(weights),
            "acc_eq": plan.acc_eq(counts),
            **dict(zip(("system_pearson", "system_accuracy"), plan.systems(weights), strict=True)),
        }
        for position, name in enumerate(statistics):
            result[position, start : start + step] = values[name]
    return result


def weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Pearson's r per row of `weights`; x and y are (rows,) or (resamples, rows)."""
    total = weights.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = x - (weights * x).sum(axis=1, keepdims=True) / total[:, None]
        dy = y - (weights * y).sum(axis=1, keepdims=True) / total[:, None]
        denominator = np.sqrt((weights * dx * dx).sum(axis=1) * (weights * dy * dy).sum(axis=1))
        r = (weights * dx * dy).sum(axis=1) / denominator
    return np.where((total >= 2) & (denominator > 0), r, np.nan)


def _runs(sorted_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of each run of equal values."""
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    return starts, np.r_[starts[1:], sorted_values.size]


def _group_pairs(weights_sorted: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per resample: the pairs within each group of sorted rows (a group of weight w: w(w-1)/2)."""
    sizes = np.add.reduceat(weights_sorted, starts, axis=1)
    return (sizes * (sizes - 1) / 2).sum(axis=1)


class _Plan:
    """The sorts and pairings of one set of rows, done once for all its resamples."""

    def __init__(
        self,
        human: np.ndarray,
        metric: np.ndarray,
        items: np.ndarray,
        systems: np.ndarray,
        groups: np.ndarray,
    ) -> None:
        self.human, self.metric, self.items = human, metric, items
        self.by_metric = np.argsort(metric, kind="stable")
        self.by_human = np.argsort(human, kind="stable")
        self.metric_runs = _runs(metric[self.by_metric])
        self.human_runs = _runs(human[self.by_human])
        # Kendall: rows sorted by metric then human; inversions of the human codes are the
        # discordant pairs.
        self.by_both = np.lexsort((human, metric))
        both_changes = (np.diff(metric[self.by_both]) != 0) | (np.diff(human[self.by_both]) != 0)
        self.both_starts = np.flatnonzero(np.r_[True, both_changes])
        self.merge_levels = _merge_levels(np.unique(human, return_inverse=True)[1][self.by_both])
        # acc-eq: the pairs within items, sorted by the metric's gap.
        first, second = item_pairs(items)
        self.pair_items = items[first]
        human_delta = human[first] - human[second]
        metric_delta = metric[first] - metric[second]
        gap = np.abs(metric_delta)
        order = np.argsort(gap, kind="stable")
        self.pair_order = order
        self.human_tie = (human_delta == 0)[order]
        same = np.sign(human_delta) == np.sign(metric_delta)
        self.agrees = ((human_delta != 0) & same & (metric_delta != 0))[order]
        self.last_of_gap = np.r_[gap[order][1:] != gap[order][:-1], True] if gap.size else gap
        # System level: rows by (direction, system) cell.
        group_codes = np.unique(groups, return_inverse=True)[1]
        cell = group_codes.astype(np.int64) * (int(systems.max()) + 1) + systems
        self.cell_order = np.argsort(cell, kind="stable")
        self.cell_starts, _ = _runs(cell[self.cell_order])
        self.cell_group = group_codes[self.cell_order][self.cell_starts]
        self.n_groups = int(self.cell_group.max()) + 1

    def _ranks(
        self, order: np.ndarray, runs: tuple[np.ndarray, np.ndarray], weights: np.ndarray
    ) -> np.ndarray:
        starts, ends = runs
        cumulative = np.cumsum(weights[:, order], axis=1)
        cumulative = np.concatenate([np.zeros((weights.shape[0], 1)), cumulative], axis=1)
        below = cumulative[:, starts]
        tied = cumulative[:, ends] - below
        ranks = np.empty_like(weights)
        ranks[:, order] = np.repeat(below + (tied + 1) / 2, ends - starts, axis=1)
        return ranks

    def metric_ranks(self, weights: np.ndarray) -> np.ndarray:
        return self._ranks(self.by_metric, self.metric_runs, weights)

    def human_ranks(self, weights: np.ndarray) -> np.ndarray:
        return self._ranks(self.by_human, self.human_runs, weights)

    def kendall(self, weights: np.ndarray) -> np.ndarray:
        total = weights.sum(axis=1)
        pairs = total * (total - 1) / 2
        tied_metric = _group_pairs(weights[:, self.by_metric], self.metric_runs[0])
        tied_human = _group_pairs(weights[:, self.by_human], self.human_runs[0])
        sorted_weights = weights[:, self.by_both]
        tied_both = _group_pairs(sorted_weights, self.both_starts)
        discordant = _weighted_inversions(self.merge_levels, sorted_weights)
        concordant = pairs - tied_metric - tied_human + tied_both - discordant
        with np.errstate(invalid="ignore", divide="ignore"):
            denominator = np.sqrt((pairs - tied_metric) * (pairs - tied_human))
            tau = (concordant - discordant) / denominator
        return np.where((total >= 2) & (denominator > 0), tau, np.nan)

    def acc_eq(self, counts: np.ndarray) -> np.ndarray:
        if not self.pair_items.size:
            return np.full(counts.shape[0], np.nan)
        weights = counts[:, self.pair_items[self.pair_order]]
        all_agreeing = weights @ self.agrees.astype(float)
        # Right at epsilon: the ties people make too, up to it, and the agreeing pairs above.
        change = weights * (self.human_tie.astype(float) - self.agrees)
        correct = all_agreeing + np.cumsum(change, axis=1)[:, self.last_of_gap].max(axis=1)
        correct = np.maximum(all_agreeing, correct)
        total = weights.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, correct / total, np.nan)

    def systems(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """System Pearson (one direction only, else NaN) and the pooled pairwise accuracy."""
        ordered = weights[:, self.cell_order]
        sizes = np.add.reduceat(ordered, self.cell_starts, axis=1)
        human = np.add.reduceat(ordered * self.human[self.cell_order], self.cell_starts, axis=1)
        metric = np.add.reduceat(ordered * self.metric[self.cell_order], self.cell_starts, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            human, metric = human / sizes, metric / sizes
        present = sizes > 0
        resamples = weights.shape[0]
        agreeing = np.zeros(resamples)
        compared = np.zeros(resamples)
        correlation = np.full(resamples, np.nan)
        groups_present = np.zeros(resamples, np.int64)
        for group in range(self.n_groups):
            cells = np.flatnonzero(self.cell_group == group)
            here = present[:, cells]
            groups_present += here.any(axis=1)
            counted = here.sum(axis=1) >= MIN_SYSTEMS
            i, j = np.triu_indices(cells.size, 1)
            h, m = human[:, cells], metric[:, cells]
            same = np.sign(h[:, i] - h[:, j]) == np.sign(m[:, i] - m[:, j])
            both = here[:, i] & here[:, j]
            agreeing += np.where(counted, (same & both).sum(axis=1), 0)
            compared += np.where(counted, both.sum(axis=1), 0)
            # Kept where this is the resample's one direction.
            r = weighted_pearson(np.where(here, m, 0.0), np.where(here, h, 0.0), here * 1.0)
            correlation = np.where(here.any(axis=1), np.where(counted, r, np.nan), correlation)
        with np.errstate(invalid="ignore", divide="ignore"):
            accuracy = np.where(compared > 0, agreeing / compared, np.nan)
        return np.where(groups_present == 1, correlation, np.nan), accuracy


def _merge_levels(ranks: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The bottom-up merge of `agreement._inversions`, as positions: per level, the positions
    (in the original order) of the left halves' rows as sorted, of the right halves' rows, and
    for each right row the range [not_above, left_block_end) of left rows above it."""
    n = ranks.size
    values = ranks.astype(np.int64)
    arrangement = np.arange(n)
    positions = np.arange(n)
    levels = []
    width = 1
    while width < n:
        block = positions // (2 * width)
        in_right = (positions // width) % 2 == 1
        keys = values + block * (n + 1)
        left_keys = keys[~in_right]
        left_block_end = np.searchsorted(left_keys, (block[in_right] + 1) * (n + 1), "left")
        not_above = np.searchsorted(left_keys, keys[in_right], "right")
        levels.append((arrangement[~in_right], arrangement[in_right], not_above, left_block_end))
        merged = np.argsort(keys, kind="stable")
        values = keys[merged] - block * (n + 1)
        arrangement = arrangement[merged]
        width *= 2
    return levels


def _weighted_inversions(
    levels: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], weights: np.ndarray
) -> np.ndarray:
    """Per resample: the sum of w_i * w_j over inverted pairs (see `_merge_levels`)."""
    total = np.zeros(weights.shape[0])
    for left, right, not_above, left_block_end in levels:
        cumulative = np.concatenate(
            [np.zeros((weights.shape[0], 1)), np.cumsum(weights[:, left], axis=1)], axis=1
        )
        above = cumulative[:, left_block_end] - cumulative[:, not_above]
        total += (weights[:, right] * above).sum(axis=1)
    return total
