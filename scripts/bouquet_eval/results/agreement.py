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

Kendall's discordant pairs are counted by `Discordance` in O(n log h) (h: the number of
distinct values of the variable with fewer), so that a pool of every direction's segments
takes a fraction of a second; the same counting, with weights, serves every bootstrap
resample and permutation trial (`weighted_agreement`). Every statistic is tested equal to
scipy.stats, or to a straightforward reference, on a synthetic table.
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


def run_starts(*keys: np.ndarray) -> np.ndarray:
    """Where a run of equal keys begins, in arrays sorted by them (0 first; none when empty)."""
    if not keys[0].size:
        return np.empty(0, np.int64)
    change = np.zeros(keys[0].size, bool)
    change[0] = True
    for key in keys:
        change[1:] |= key[1:] != key[:-1]
    return np.flatnonzero(change)


def _tied_pairs(values: np.ndarray) -> int:
    _, counts = np.unique(values, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


@dataclass(frozen=True)
class _Level:
    """One bit of y's codes: the rows of its upper and of its lower halves, each by node and in
    the sorted order within; for each lower row, how many upper rows (counted over all nodes)
    are before it in its node or in an earlier node; per node that has lower rows, how many
    upper rows the earlier nodes hold, and where its lower rows begin; where each segment's
    lower rows begin, and the segments that have any (and where their nodes begin)."""

    upper: np.ndarray
    lower: np.ndarray
    upper_before: np.ndarray
    node_upper_before: np.ndarray
    node_starts: np.ndarray
    segment_starts: np.ndarray
    segments: np.ndarray
    segment_node_starts: np.ndarray


@dataclass(frozen=True)
class Discordance:
    """Discordant pairs of rows sorted by (segment, x, y), counted bit by bit of y's codes.

    A pair, i before j, is discordant when y_i > y_j (ties in x are sorted by y, so such a
    pair never ties in x). Split at the highest bit where their codes differ, i is in the upper
    half and j in the lower half of the same node (segment and higher bits): at each level,
    every lower row counts the weight of the upper rows before it in its node, a cumulative
    sum over the upper rows read where the lower row falls. ceil(log2(distinct y)) levels,
    each O(n) per row of weights; a pair counts w_i * w_j, so one structure serves every
    resample or trial."""

    n_segments: int
    levels: tuple[_Level, ...]

    @classmethod
    def of(cls, codes: np.ndarray, segments: np.ndarray) -> Discordance:
        """`codes`: y's codes 0..h-1 and `segments`: non-decreasing segment numbers 0..s-1, of
        rows sorted by (segment, x, y)."""
        levels = []
        bits = int(codes.max()).bit_length() if codes.size else 0
        for bit in reversed(range(bits)):
            node = segments * (1 << (bits - bit - 1)) + (codes >> (bit + 1))
            order = np.argsort(node, kind="stable")
            is_upper = ((codes[order] >> bit) & 1).astype(bool)
            upper_before = np.cumsum(is_upper)[~is_upper]
            lower = order[~is_upper]
            node_starts = run_starts(node[lower])
            # Upper rows of earlier nodes: those before the node's first row.
            first_rows = np.searchsorted(node[order], node[lower][node_starts], "left")
            node_upper_before = np.r_[0, np.cumsum(is_upper)][first_rows]
            segment_starts = run_starts(segments[lower])
            levels.append(
                _Level(
                    order[is_upper],
                    lower,
                    upper_before,
                    node_upper_before,
                    node_starts,
                    segment_starts,
                    segments[lower][segment_starts],
                    run_starts(segments[lower][node_starts]),
                )
            )
        n_segments = int(segments.max()) + 1 if segments.size else 0
        return cls(n_segments, tuple(levels))

    def count(self, weights: np.ndarray) -> np.ndarray:
        """(rows of `weights`, segments): the sum of w_i * w_j over each segment's discordant
        pairs; `weights` are integers (int32), one column per sorted row."""
        total = np.zeros((weights.shape[0], self.n_segments))
        for level in self.levels:
            upper = np.take(weights, level.upper, axis=1)
            # Cumulative upper weights, 0 first: entry k sums the first k upper rows.
            cumulative = np.zeros((len(weights), upper.shape[1] + 1), np.int32)
            np.cumsum(upper, axis=1, dtype=np.int32, out=cumulative[:, 1:])
            lower = np.take(weights, level.lower, axis=1)
            before = np.take(cumulative, level.upper_before, axis=1)
            products = np.multiply(lower, before, dtype=np.float64)
            counted = np.add.reduceat(products, level.segment_starts, axis=1)
            # Less the upper weight of earlier nodes, per node: by the node's lower weight.
            earlier = np.take(cumulative, level.node_upper_before, axis=1)
            in_node = np.add.reduceat(lower, level.node_starts, axis=1)
            shift = np.multiply(earlier, in_node, dtype=np.float64)
            counted -= np.add.reduceat(shift, level.segment_node_starts, axis=1)
            total[:, level.segments] += counted
        return total


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b; NaN where either vector is constant or has fewer than two values."""
    n = x.size
    if n < 2:
        return float("nan")
    x_codes = np.unique(x, return_inverse=True)[1]
    y_codes = np.unique(y, return_inverse=True)[1]
    if x_codes.max() < y_codes.max():  # symmetric: levels over the one with fewer values
        x_codes, y_codes = y_codes, x_codes
    pairs = n * (n - 1) // 2
    tied_x, tied_y = _tied_pairs(x_codes), _tied_pairs(y_codes)
    order = np.lexsort((y_codes, x_codes))
    xs, ys = x_codes[order], y_codes[order]
    runs = np.diff(np.r_[run_starts(xs, ys), n])
    tied_both = int((runs * (runs - 1) // 2).sum())
    discordance = Discordance.of(ys, np.zeros(n, np.int64))
    discordant = int(discordance.count(np.ones((1, n), np.int32))[0, 0])
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
    """System Pearson (one group only, else NaN) and the pooled pairwise accuracy counts: the
    pairs of systems within each group of at least MIN_SYSTEMS systems."""
    if not human.size:
        return float("nan"), 0, 0
    group_index = np.unique(groups, return_inverse=True)[1]
    cells, cell_index = np.unique(
        group_index * (int(systems.max()) + 1) + systems, return_inverse=True
    )
    human_means = system_means(human, cell_index, cells.size)
    metric_means = system_means(metric, cell_index, cells.size)
    cell_group = cells // (int(systems.max()) + 1)
    systems_in_group = np.bincount(cell_group)
    first, second = item_pairs(cell_group)
    counted = systems_in_group[cell_group[first]] >= MIN_SYSTEMS
    same = np.sign(human_means[first] - human_means[second]) == np.sign(
        metric_means[first] - metric_means[second]
    )
    correlation = float("nan")
    if systems_in_group.size == 1 and cells.size >= MIN_SYSTEMS:
        correlation = pearson(metric_means, human_means)
    return correlation, int((same & counted).sum()), int(counted.sum())


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
