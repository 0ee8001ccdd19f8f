"""Agreement between a metric's scores and human scores, the statistics MTME reports.

Segment level, over every judged translation of a set (flattened, no grouping, as MTME's
`average_by='none'`): Pearson's r, Spearman's rho (average ranks for ties) and Kendall's
tau-b; and acc-eq, the pairwise accuracy with tie calibration of Deutsch et al. (2023), as
MTME computes it for segment level (`KendallWithTiesOpt`, variant `acc23`,
`average_by='item'`, `sample_rate` 1.0): per item (the translations of one source segment by
several systems), the share of its pairs of translations that the metric orders as people
do, a pair counting as tied by the metric when its scores differ by at most epsilon and as
tied by people when their scores are equal; averaged over the items that have a pair; epsilon
is the one of the candidate thresholds (0 and every difference of the metric within an item)
that gives the highest average, one epsilon per set. `acc_eq_pooled` is the variant that
pools the pairs of all items (micro average) instead.

System level: each system's mean human and mean metric score over its judged segments of a
direction; Pearson's r across the systems of a direction with at least three, and the
pairwise accuracy (MTME's `Agreement`): the share of system pairs whose two differences have
the same sign, the pairs of every direction counted together (MTME's accuracy over several
language pairs).

Kendall's discordant pairs are counted by `Discordance` in O(n log h) (h: the number of
distinct values of the variable with fewer), so that a pool of every direction's segments
takes a fraction of a second; the same counting, with weights, serves every bootstrap
resample and permutation trial (`weighted_agreement`). Every statistic is tested equal to
MTME's own code (tests/test_mtme_statistics.py) and to scipy.stats or a straightforward
reference (tests/test_metaeval.py) on synthetic tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MIN_SYSTEMS = 3
"""A direction's system-level Pearson needs at least this many systems."""
MTME_STATISTICS = (
    "pearson",
    "spearman",
    "kendall",
    "acc_eq",
    "acc_eq_epsilon",
    "system_pearson",
    "system_accuracy",
)
"""The columns of correlations.csv that MTME's code computes too, equal to its to 1e-9 (tested
against its outputs at a pinned commit: tests/test_mtme_statistics.py)."""


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


def acc_eq_pooled(human: np.ndarray, metric: np.ndarray, items: np.ndarray) -> tuple[float, float]:
    """(accuracy, epsilon) of tie-calibrated pairwise accuracy over the pairs within items,
    pooled: every pair of every item counts once (a micro average, not MTME's)."""
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


def mtme_pairs(
    items: np.ndarray, systems: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs of MTME's matrix in the order MTME enumerates them: its items (columns) in the
    order of their codes, within each its systems (rows) in the order of `systems` (by default
    the rows' own order), every i < j in turn. (first, second) row positions of each pair and
    its item's column, 0.. in the order of the items given."""
    order = np.lexsort((np.arange(items.size) if systems is None else systems, items))
    first, second = item_pairs(items[order])
    enumerated = np.lexsort((second, first))
    first, second = order[first[enumerated]], order[second[enumerated]]
    return first, second, np.unique(items, return_inverse=True)[1][first]


def acc_eq(
    human: np.ndarray, metric: np.ndarray, items: np.ndarray, systems: np.ndarray | None = None
) -> tuple[float, float]:
    """(accuracy, epsilon): MTME's `KendallWithTiesOpt(variant='acc23', average_by='item',
    sample_rate=1.0)` over the matrix of these rows (`mtme_pairs`).

    MTME (tau_optimization.py) sorts the pairs by gap (stably), then ties them one at a time,
    keeping a running sum of the items' accuracies: the thresholds' averages are that sum's
    values, and the first of the highest is chosen. Where several thresholds give the same
    average but for rounding, which one that is depends on the sum's rounding, so this
    follows the same floating-point operations in the same order: the first sum over the
    items in the order of MTME's Python set of their columns, then one subtraction and one
    addition per pair (a cumulative sum, which numpy adds in order). Accuracy and epsilon
    are then MTME's to the last bit."""
    first, second, column = mtme_pairs(items, systems)
    if not first.size:
        return float("nan"), float("nan")
    human_delta = human[first] - human[second]
    metric_delta = metric[first] - metric[second]
    # Right untied (concordant, or tied by both) and right tied by the metric (tied by people).
    right = (np.sign(human_delta) == np.sign(metric_delta)).astype(np.int64)
    change = (human_delta == 0).astype(np.int64) - right
    pairs = np.bincount(column)
    right_at_start = np.bincount(column, weights=right).astype(np.int64)
    gap = np.abs(metric_delta)
    order = np.argsort(gap, kind="stable")
    gap, column, change = gap[order], column[order], change[order]
    # Each item's right pairs before each of its pairs is tied: cumulative sums per item.
    by_item = np.argsort(column, kind="stable")
    changes = change[by_item]
    running = np.cumsum(changes)
    item_starts = run_starts(column[by_item])
    sizes = np.diff(np.r_[item_starts, column.size])
    before = np.empty(column.size, np.int64)
    before[by_item] = (
        running - changes - np.repeat(running[item_starts] - changes[item_starts], sizes)
    )
    right_before = right_at_start[column] + before
    old = right_before / pairs[column]
    new = (right_before + change) / pairs[column]
    # MTME's rows: a set of the item columns that have pairs, summed in the set's order.
    present = list(set(np.flatnonzero(pairs).tolist()))
    start = sum((right_at_start[present] / pairs[present]).tolist())
    steps = np.empty(2 * gap.size + 1)
    steps[0], steps[1::2], steps[2::2] = start, -old, new
    averages = np.cumsum(steps)[2::2] / len(present)
    last_of_gap = np.r_[gap[1:] != gap[:-1], True]
    thresholds, values = gap[last_of_gap], averages[last_of_gap]
    if gap[0] != 0:  # MTME's first threshold, 0, ties no pair
        thresholds, values = np.r_[0.0, thresholds], np.r_[start / len(present), values]
    best = int(np.argmax(values))
    return float(values[best]), float(thresholds[best])


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
    acc_eq_pooled: float
    acc_eq_pooled_epsilon: float
    system_pearson: float
    system_accuracy: float

    @staticmethod
    def statistics() -> tuple[str, ...]:
        """The statistics that have bootstrap intervals (the pooled acc-eq has none)."""
        return ("pearson", "spearman", "kendall", "acc_eq", "system_pearson", "system_accuracy")


SEGMENT_STATISTICS = {
    "pearson": pearson,
    "spearman": spearman,
    "kendall": kendall_tau_b,
}


def segment_statistic(
    name: str,
    human: np.ndarray,
    metric: np.ndarray,
    items: np.ndarray,
    systems: np.ndarray | None = None,
) -> float:
    """One segment-level statistic by name (`metaeval.decide_by`)."""
    if name == "acc_eq":
        return acc_eq(human, metric, items, systems)[0]
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
    accuracy, epsilon = acc_eq(human, metric, items, systems)
    pooled, pooled_epsilon = acc_eq_pooled(human, metric, items)
    system_pearson, agreeing, compared = _system_level(human, metric, systems, groups)
    return Agreement(
        n_segments=int(human.size),
        n_systems=int(np.unique(systems).size),
        pearson=pearson(metric, human),
        spearman=spearman(metric, human),
        kendall=kendall_tau_b(metric, human),
        acc_eq=accuracy,
        acc_eq_epsilon=epsilon,
        acc_eq_pooled=pooled,
        acc_eq_pooled_epsilon=pooled_epsilon,
        system_pearson=system_pearson,
        system_accuracy=agreeing / compared if compared else float("nan"),
    )


def _system_level(
    human: np.ndarray, metric: np.ndarray, systems: np.ndarray, groups: np.ndarray
) -> tuple[float, int, int]:
    """System Pearson (one group of at least MIN_SYSTEMS systems only, else NaN) and the
    pooled pairwise accuracy counts: the pairs of systems within each group."""
    if not human.size:
        return float("nan"), 0, 0
    group_index = np.unique(groups, return_inverse=True)[1]
    cells, cell_index = np.unique(
        group_index * (int(systems.max()) + 1) + systems, return_inverse=True
    )
    human_means = system_means(human, cell_index, cells.size)
    metric_means = system_means(metric, cell_index, cells.size)
    cell_group = cells // (int(systems.max()) + 1)
    first, second = item_pairs(cell_group)
    same = np.sign(human_means[first] - human_means[second]) == np.sign(
        metric_means[first] - metric_means[second]
    )
    correlation = float("nan")
    if group_index.max() == 0 and cells.size >= MIN_SYSTEMS:
        correlation = pearson(metric_means, human_means)
    return correlation, int(same.sum()), int(first.size)


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
