"""The statistics of `agreement` for many rows of integer weights at once, in numpy.

A bootstrap resample draws item k counts[k] times, so it holds each row of item k counts[k]
times: every statistic of the resample is the statistic of the original rows weighted by
their item's count. A permutation trial takes each row's score from one metric or the other:
it is the statistic of both metrics' rows weighted 1 where taken and 0 where not
(`permutation`). Weighted this way, each statistic is a few passes over a (weights, rows)
matrix of integers, the sorts and pairings done once for all rows of weights:

- Pearson's r from weighted moments, the rows first summed per (segment, weight column): an
  item's rows share their weight.
- Spearman's rho from weighted average ranks: a tie group's rank is the weight below it in
  its segment plus half of its own (cumulative sums of integers in the sorted order).
- Kendall's tau-b from weighted pair counts: the pairs tied in x, in y and in both from the
  weights of each tie group (a row's copies are tied with each other in both), the discordant
  pairs by `agreement.Discordance`, over the variable with fewer distinct values.
- acc-eq over pairs (within items), each weighted: sorted by the metric's gap once, the right
  pairs at each candidate epsilon are cumulative sums; the best over the original candidates
  (one that no weighted pair makes gives the accuracy of the one below it).
- System means per direction and system from weighted sums (`SystemCells`); a system absent
  from a resample is left out as it is there.

Rows belong to segments (a scope, a permutation test): every statistic is computed per
segment, so that all directions and pools of a metric, or all tests of a run, take one pass.
Weights are integers, so pair counts and accuracies are exact; correlations equal the loop
over resampled rows to rounding (tests/test_metaeval.py compares them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bouquet_eval.results.agreement import (
    MIN_SYSTEMS,
    Agreement,
    Discordance,
    item_pairs,
    run_starts,
)

Mapper = Callable[..., Iterable[Any]]
"""`map`, or a thread pool's: how independent batches are run."""

CHUNK_CELLS = 250_000
"""Rows of weights are processed in chunks of about this many (weights, row) cells."""

SEGMENT_LEVEL = ("pearson", "spearman", "kendall", "acc_eq")


def chunks(count: int, width: int) -> Iterator[tuple[int, int]]:
    """[start, stop) ranges of `count` rows of weights, each about CHUNK_CELLS / `width` rows."""
    step = max(1, CHUNK_CELLS // max(width, 1))
    for start in range(0, count, step):
        yield start, min(start + step, count)


def dense(values: np.ndarray) -> np.ndarray:
    """Codes 0..k-1 in the order of the values."""
    return np.unique(values, return_inverse=True)[1].astype(np.int64)


@dataclass(frozen=True)
class Pairs:
    """Pairs of rows (or of candidate scores) for acc-eq: the human and metric differences,
    the weight column and the segment of each, and its share: what it weighs in its segment's
    average over items, one over its item's pairs (MTME's average by item)."""

    human_delta: np.ndarray
    metric_delta: np.ndarray
    columns: np.ndarray
    segments: np.ndarray
    share: np.ndarray

    @classmethod
    def within_items(
        cls,
        human: np.ndarray,
        metric: np.ndarray,
        items: np.ndarray,
        columns: np.ndarray,
        segments: np.ndarray,
    ) -> Pairs:
        """The pairs of rows of one item in one segment; a pair weighs as its first row."""
        first, second = item_pairs(segments * (int(items.max(initial=0)) + 1) + items)
        return cls(
            human[first] - human[second],
            metric[first] - metric[second],
            columns[first],
            segments[first],
            item_shares(segments[first] * (int(items.max(initial=0)) + 1) + items[first]),
        )


def item_shares(item_of_pair: np.ndarray) -> np.ndarray:
    """Per pair, one over the pairs of its item (a code per pair)."""
    codes = dense(item_of_pair)
    return 1.0 / np.bincount(codes)[codes] if codes.size else np.empty(0)


def _units(segment: np.ndarray, columns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows (or pairs) by (segment, weight column): the order that groups them, where each
    unit begins in it, and where each segment's units begin among the units."""
    order = np.lexsort((columns, segment))
    starts = run_starts(segment[order], columns[order])
    return order, starts, run_starts(segment[order][starts])


class _Ties:
    """The runs of equal keys of two rows or more in a sorted order (most rows are alone in
    theirs): sums over tie groups are sums over rows, corrected here for these."""

    def __init__(self, starts: np.ndarray, size: int, segment: np.ndarray) -> None:
        sizes = np.diff(np.r_[starts, size])
        tied = sizes >= 2
        self.firsts = starts[tied]
        self.group_starts = np.cumsum(sizes[tied]) - sizes[tied]
        within = np.arange(int(sizes[tied].sum())) - np.repeat(self.group_starts, sizes[tied])
        self.positions = np.repeat(self.firsts, sizes[tied]) + within
        self.sizes = sizes[tied]
        self.present = segment[self.firsts]
        self.segment_starts = run_starts(self.present)
        self.row_segment_starts = run_starts(segment[self.positions])

    def __bool__(self) -> bool:
        return bool(self.firsts.size)

    def weights(self, sorted_weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The weights of the tied rows, and each group's."""
        rows = sorted_weights[:, self.positions]
        return rows, np.add.reduceat(rows, self.group_starts, axis=1)

    def place(self, values: np.ndarray, n_segments: int, starts: np.ndarray) -> np.ndarray:
        """Per segment: the sum of `values`, one per group (`starts`: `segment_starts`) or
        per tied row (`row_segment_starts`)."""
        placed = np.zeros((len(values), n_segments))
        placed[:, self.present[self.segment_starts]] = np.add.reduceat(values, starts, axis=1)
        return placed

    def correction(
        self, sorted_weights: np.ndarray, function: Callable[[np.ndarray], np.ndarray], n: int
    ) -> np.ndarray:
        """Per segment: the sum of `function` over these groups' weights, less its sum over
        their rows' weights."""
        if not self:
            return np.zeros((len(sorted_weights), n))
        rows, groups = self.weights(sorted_weights)
        alone = np.add.reduceat(function(rows.astype(np.float64)), self.group_starts, axis=1)
        return self.place(function(groups.astype(np.float64)) - alone, n, self.segment_starts)


def _tied_pairs(weights: np.ndarray) -> np.ndarray:
    return weights * (weights - 1) / 2


def _cube_excess(weights: np.ndarray) -> np.ndarray:
    return weights * weights * weights - weights


class SegmentedRows:
    """Rows of one or more segments, sorted and paired once, for the segment-level statistics
    of many rows of weights (`statistics`).

    `columns`: each row's column of the weight matrices; `segments`: non-decreasing segment
    numbers, every segment having rows. Weight matrices are (weights, columns) of int32."""

    def __init__(
        self,
        human: np.ndarray,
        metric: np.ndarray,
        columns: np.ndarray,
        segments: np.ndarray,
        pairs: Pairs | None = None,
    ) -> None:
        n = human.size
        segment = dense(segments)
        self.n_segments = int(segment.max()) + 1 if n else 0
        self.segment_starts = run_starts(segment)
        self._moments(human, metric, columns, segment)
        # x (the metric) sorted within segments, ties by y; the human scores' tie groups.
        by_x = np.lexsort((human, metric, segment))
        self.x_columns = columns[by_x]
        x, y, x_segment = metric[by_x], human[by_x], segment[by_x]
        self.x_ties = _Ties(run_starts(x_segment, x), n, x_segment)
        self.xy_ties = _Ties(run_starts(x_segment, x, y), n, x_segment)
        human_codes = dense(human)
        y_order, y_unit_starts, _ = _units(segment * (int(human_codes.max(initial=0)) + 1)
                                           + human_codes, columns)  # fmt: skip
        self.y_unit_columns = columns[y_order][y_unit_starts]
        self.y_unit_rows = np.diff(np.r_[y_unit_starts, n]).astype(np.int32)
        y_group_key = (segment * (int(human_codes.max(initial=0)) + 1) + human_codes)[y_order]
        self.y_group_unit_starts = run_starts(y_group_key[y_unit_starts])
        y_group_segment = segment[y_order][y_unit_starts][self.y_group_unit_starts]
        self.y_group_segment = y_group_segment
        self.y_segment_first_group = run_starts(y_group_segment)
        group_of_row = np.empty(n, np.int64)
        group_of_row[y_order] = np.cumsum(np.r_[True, y_group_key[1:] != y_group_key[:-1]]) - 1
        self.y_group_at_x = group_of_row[by_x]
        # Discordant pairs counted over the bits of the variable with fewer distinct values.
        metric_codes = dense(metric)
        self.kendall_by_x = human_codes.max(initial=0) <= metric_codes.max(initial=0)
        if self.kendall_by_x:
            self.discordance = Discordance.of(human_codes[by_x], x_segment)
        else:
            by_y = np.lexsort((metric, human, segment))
            self.y_columns = columns[by_y]
            self.discordance = Discordance.of(metric_codes[by_y], segment[by_y])
        self.pairs = None if pairs is None else PairAccuracy(pairs, self.n_segments)

    def _moments(
        self, human: np.ndarray, metric: np.ndarray, columns: np.ndarray, segment: np.ndarray
    ) -> None:
        """Per (segment, column) unit: the sums of 1, x, y, x^2, y^2 and xy over its rows,
        x and y centred on their segment's means."""
        sizes = np.diff(np.r_[self.segment_starts, human.size])
        x = metric - np.repeat(np.add.reduceat(metric, self.segment_starts) / sizes, sizes)
        y = human - np.repeat(np.add.reduceat(human, self.segment_starts) / sizes, sizes)
        order, starts, self.unit_segment_starts = _units(segment, columns)
        values = np.stack([np.ones_like(x), x, y, x * x, y * y, x * y])[:, order]
        self.unit_moments = np.add.reduceat(values, starts, axis=1) if starts.size else values
        self.unit_columns = columns[order][starts]

    def _per_segment(self, unit_weights: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Per segment: the sum over its rows of `values`, one per unit, by unit weight."""
        return np.add.reduceat(unit_weights * values, self.unit_segment_starts, axis=1)

    def statistics(
        self, weights: np.ndarray, wanted: Sequence[str] = SEGMENT_LEVEL
    ) -> dict[str, np.ndarray]:
        """Each `wanted` statistic, (rows of `weights`, segments), NaN where undefined."""
        found = {}
        unit_weights = np.take(weights, self.unit_columns, axis=1).astype(np.float64)
        total = self._per_segment(unit_weights, self.unit_moments[0])
        if "pearson" in wanted:
            found["pearson"] = self._pearson(unit_weights, total)
        if "spearman" in wanted or "kendall" in wanted:
            x_weights = np.take(weights, self.x_columns, axis=1).astype(np.int32, copy=False)
            y_units = np.take(weights, self.y_unit_columns, axis=1).astype(np.int32, copy=False)
            y_groups = np.add.reduceat(y_units * self.y_unit_rows, self.y_group_unit_starts, axis=1)
            if "spearman" in wanted:
                found["spearman"] = self._spearman(unit_weights, x_weights, y_groups, total)
            if "kendall" in wanted:
                found["kendall"] = self._kendall(weights, unit_weights, x_weights, y_groups, total)
        if "acc_eq" in wanted:
            found["acc_eq"] = (
                self.pairs.accuracy(weights)
                if self.pairs is not None
                else np.full((len(weights), self.n_segments), np.nan)
            )
        return found

    def _pearson(self, unit_weights: np.ndarray, total: np.ndarray) -> np.ndarray:
        sx, sy, sxx, syy, sxy = (
            self._per_segment(unit_weights, moment) for moment in self.unit_moments[1:]
        )
        with np.errstate(invalid="ignore", divide="ignore"):
            covariance = sxy - sx * sy / total
            denominator = np.sqrt((sxx - sx * sx / total) * (syy - sy * sy / total))
            r = covariance / denominator
        return np.where((total >= 2) & (denominator > 0), r, np.nan)

    def _y_ranks(self, y_groups: np.ndarray, total: np.ndarray) -> np.ndarray:
        """Each human tie group's doubled average rank, centred on its segment's mean rank."""
        before = np.cumsum(y_groups, axis=1, dtype=np.int64) - y_groups
        below = before - before[:, self.y_segment_first_group][:, self.y_group_segment]
        return 2 * below + y_groups - total[:, self.y_group_segment].astype(np.int64)

    def _tie_sum(
        self,
        unit_weights: np.ndarray,
        x_weights: np.ndarray,
        ties: _Ties,
        function: Callable[[np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """Per segment: the sum of `function` of the weight of each group of `ties`."""
        alone = self._per_segment(function(unit_weights), self.unit_moments[0])
        return alone + ties.correction(x_weights, function, self.n_segments)

    def _spearman(
        self,
        unit_weights: np.ndarray,
        x_weights: np.ndarray,
        y_groups: np.ndarray,
        total: np.ndarray,
    ) -> np.ndarray:
        # Doubled ranks: a row alone in its tie group has 2 * (weight up to it) - its weight,
        # less its segment's 2 * (weight before it) + total, a constant that the human ranks,
        # centred, cancel out of the sum of products.
        cumulative = np.cumsum(x_weights, axis=1, dtype=np.int32)
        doubled = cumulative + cumulative
        doubled -= x_weights
        y_rank = self._y_ranks(y_groups, total)
        y_at_x = np.take(y_rank, self.y_group_at_x, axis=1)
        cross = np.multiply(x_weights, doubled, dtype=np.float64)
        cross *= y_at_x
        sxy = np.add.reduceat(cross, self.segment_starts, axis=1)
        ties = self.x_ties
        if ties:
            # Tied rows take their group's rank: 2 * (weight before the group) + its weight.
            rows, groups = ties.weights(x_weights)
            first = ties.firsts
            group_rank = 2 * (cumulative[:, first] - x_weights[:, first]) + groups
            change = np.repeat(group_rank, ties.sizes, axis=1) - doubled[:, ties.positions]
            extra = rows * change.astype(np.float64) * y_at_x[:, ties.positions]
            sxy += ties.place(extra, self.n_segments, ties.row_segment_starts)
        # The sum of squared centred ranks, with ties: (W^3 - W - sum of (t^3 - t)) / 3.
        cubes = (total**3 - total) / 3
        sxx = cubes - self._tie_sum(unit_weights, x_weights, ties, _cube_excess) / 3
        y_excess = _cube_excess(y_groups.astype(np.float64))
        syy = cubes - np.add.reduceat(y_excess, self.y_segment_first_group, axis=1) / 3
        with np.errstate(invalid="ignore", divide="ignore"):
            denominator = np.sqrt(sxx * syy)
            rho = sxy / denominator
        return np.where((total >= 2) & (denominator > 0), rho, np.nan)

    def _kendall(
        self,
        weights: np.ndarray,
        unit_weights: np.ndarray,
        x_weights: np.ndarray,
        y_groups: np.ndarray,
        total: np.ndarray,
    ) -> np.ndarray:
        pairs = total * (total - 1) / 2
        tied_x = self._tie_sum(unit_weights, x_weights, self.x_ties, _tied_pairs)
        tied_both = self._tie_sum(unit_weights, x_weights, self.xy_ties, _tied_pairs)
        y_pairs = _tied_pairs(y_groups.astype(np.float64))
        tied_y = np.add.reduceat(y_pairs, self.y_segment_first_group, axis=1)
        if self.kendall_by_x:
            discordant = self.discordance.count(x_weights)
        else:
            y_weights = np.take(weights, self.y_columns, axis=1).astype(np.int32, copy=False)
            discordant = self.discordance.count(y_weights)
        concordant = pairs - tied_x - tied_y + tied_both - discordant
        with np.errstate(invalid="ignore", divide="ignore"):
            denominator = np.sqrt((pairs - tied_x) * (pairs - tied_y))
            tau = (concordant - discordant) / denominator
        return np.where((total >= 2) & (denominator > 0), tau, np.nan)


class PairAccuracy:
    """acc-eq's pairs sorted by (segment, gap), for the accuracy of each segment under rows of
    weights, averaged over items: each pair counts by its weight times its share, and the
    right pairs at each candidate epsilon are cumulative sums.

    Within a run of equal gaps the pairs that people order and the metric too come first and
    those people tie last, so that the cumulative sum inside a run never exceeds both of its
    ends: the best over every position is the best over the candidate epsilons."""

    def __init__(self, pairs: Pairs, n_segments: int) -> None:
        segment = pairs.segments
        gap = np.abs(pairs.metric_delta)
        human_delta, metric_delta = pairs.human_delta, pairs.metric_delta
        tie = human_delta == 0
        agrees = ~tie & (np.sign(human_delta) == np.sign(metric_delta)) & (metric_delta != 0)
        # Right at epsilon: the ties people make too, up to it, and the agreeing pairs above.
        change = tie.astype(np.int32) - agrees
        order = np.lexsort((change, gap, segment))
        self.columns = pairs.columns[order]
        self.change = (change * pairs.share)[order]
        self.segment_starts = run_starts(segment[order])
        self.present = segment[order][self.segment_starts]
        self.n_segments = n_segments
        # Per (segment, column): its items (the shares of its pairs), and the share of them
        # that the metric orders as people do.
        unit_order, unit_starts, self.unit_segment_starts = _units(segment, pairs.columns)
        self.unit_columns = pairs.columns[unit_order][unit_starts]
        shares = pairs.share[unit_order]
        self.unit_items = np.add.reduceat(shares, unit_starts) if unit_starts.size else shares
        self.unit_agreeing = (
            np.add.reduceat(np.where(agrees[unit_order], shares, 0.0), unit_starts)
            if unit_starts.size
            else shares
        )

    def accuracy(self, weights: np.ndarray) -> np.ndarray:
        """(rows of `weights`, segments): acc-eq of each segment, NaN where it has no pair."""
        if not self.columns.size:
            return np.full((len(weights), self.n_segments), np.nan)
        unit_weights = np.take(weights, self.unit_columns, axis=1).astype(np.float64)
        total = np.add.reduceat(unit_weights * self.unit_items, self.unit_segment_starts, axis=1)
        agreeing = np.add.reduceat(
            unit_weights * self.unit_agreeing, self.unit_segment_starts, axis=1
        )
        gain = self.gain(np.take(weights, self.columns, axis=1))
        result = np.full((len(weights), self.n_segments), np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            result[:, self.present] = np.where(total > 0, (agreeing + gain) / total, np.nan)
        return result

    def gain(self, sorted_weights: np.ndarray) -> np.ndarray:
        """(rows of weights, segments that have pairs): the most right (weighed by share) that
        tying the pairs up to an epsilon gains over tying none, weights in the sorted order."""
        changes = sorted_weights * self.change
        cumulative = np.cumsum(changes, axis=1)
        top = np.maximum.reduceat(cumulative, self.segment_starts, axis=1)
        base = cumulative[:, self.segment_starts] - changes[:, self.segment_starts]
        return np.maximum(top - base, 0)


class SystemCells:
    """The system level of many directions (groups) under many rows of weights: each system's
    weighted means per direction, and per direction Pearson's r across its systems (MIN_SYSTEMS
    present or more) and its agreeing and compared pairs of systems."""

    def __init__(
        self,
        human: np.ndarray,
        metric: np.ndarray,
        columns: np.ndarray,
        systems: np.ndarray,
        groups: np.ndarray,
    ) -> None:
        group = dense(groups)
        self.n_groups = int(group.max()) + 1 if group.size else 0
        cell = group * (int(systems.max(initial=0)) + 1) + systems
        order = np.argsort(cell, kind="stable")
        self.starts = run_starts(cell[order])
        self.columns = columns[order]
        self.human, self.metric = human[order], metric[order]
        cell_group = group[order][self.starts]
        # Each cell's slot among its direction's systems, in a (groups, slots) layout.
        first_of_group = run_starts(cell_group)
        slot = np.arange(cell_group.size) - np.repeat(
            first_of_group, np.diff(np.r_[first_of_group, cell_group.size])
        )
        self.slots = int(slot.max(initial=0)) + 1
        self.position = cell_group * self.slots + slot
        self.first, self.second = np.triu_indices(self.slots, 1)

    def statistics(
        self, weights: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(system Pearson, agreeing pairs, compared pairs, whether the direction has rows),
        each (rows of weights, groups)."""
        count = len(weights)
        shape = (count, self.n_groups * self.slots)
        cell_weights = np.take(weights, self.columns, axis=1).astype(np.float64)
        sizes, human, metric = (np.zeros(shape) for _ in range(3))
        sizes[:, self.position] = np.add.reduceat(cell_weights, self.starts, axis=1)
        for means, values in ((human, self.human), (metric, self.metric)):
            means[:, self.position] = np.add.reduceat(cell_weights * values, self.starts, axis=1)
        present = (sizes > 0).reshape(count, self.n_groups, self.slots)
        with np.errstate(invalid="ignore", divide="ignore"):
            human = np.where(present, (human / sizes).reshape(present.shape), 0.0)
            metric = np.where(present, (metric / sizes).reshape(present.shape), 0.0)
        i, j = self.first, self.second
        same = np.sign(human[..., i] - human[..., j]) == np.sign(metric[..., i] - metric[..., j])
        both = present[..., i] & present[..., j]
        agreeing = (same & both).sum(axis=2)
        compared = both.sum(axis=2)
        # Pearson's r over the present systems of each direction that has MIN_SYSTEMS.
        systems = present.sum(axis=2)
        counted = systems >= MIN_SYSTEMS
        with np.errstate(invalid="ignore", divide="ignore"):
            dx = np.where(present, metric - (metric.sum(axis=2) / systems)[..., None], 0.0)
            dy = np.where(present, human - (human.sum(axis=2) / systems)[..., None], 0.0)
            denominator = np.sqrt((dx * dx).sum(axis=2) * (dy * dy).sum(axis=2))
            r = (dx * dy).sum(axis=2) / denominator
        correlation = np.where(counted & (denominator > 0), r, np.nan)
        return correlation, agreeing, compared, np.asarray(present.any(axis=2))


def scope_statistics(
    human: np.ndarray,
    metric: np.ndarray,
    items: np.ndarray,
    systems: np.ndarray,
    groups: np.ndarray,
    scopes: Sequence[np.ndarray],
    draws: Callable[[int, int, np.ndarray], np.ndarray],
    resamples: int,
    mapper: Mapper = map,
) -> np.ndarray:
    """(statistics of `Agreement.statistics()`, scopes, resamples): each statistic of each
    scope in each resample.

    `draws(start, stop, items)`: for resamples start..stop-1, how often each of `items` (codes,
    sorted) is drawn (integers). Each scope is the positions of its rows, and holds every row
    of each group (direction) it holds any of. Scopes, and groups, are computed a batch at a
    time (BATCH_ROWS rows or one scope), so that each pass stays in the processor's cache;
    `mapper` runs the batches (a thread pool's `map` runs them side by side)."""
    statistics = Agreement.statistics()
    result = np.full((len(statistics), len(scopes), resamples), np.nan)
    if not scopes:
        return result
    group_index = dense(groups)
    n_groups = int(group_index.max()) + 1
    system = np.zeros((4, resamples, n_groups))
    group_rows = [np.flatnonzero(group_index == group) for group in range(n_groups)]

    def system_level(batch: list[int]) -> None:
        """The system level of a batch of groups (directions)."""
        rows = np.concatenate([group_rows[group] for group in batch])
        wanted, columns = np.unique(items[rows], return_inverse=True)
        cells = SystemCells(human[rows], metric[rows], columns, systems[rows], groups[rows])
        for start, stop in chunks(resamples, rows.size):
            found = cells.statistics(draws(start, stop, wanted))
            for position, values in enumerate(found):
                system[position][start:stop, batch] = values

    def segment_level(batch: list[int]) -> None:
        """A batch of scopes, the segments of one computation."""
        rows = np.concatenate([scopes[position] for position in batch])
        segments = np.repeat(np.arange(len(batch)), [scopes[p].size for p in batch])
        wanted, columns = np.unique(items[rows], return_inverse=True)
        pairs = Pairs.within_items(human[rows], metric[rows], columns, columns, segments)
        segmented = SegmentedRows(human[rows], metric[rows], columns, segments, pairs)
        for start, stop in chunks(resamples, max(rows.size, pairs.columns.size)):
            found = segmented.statistics(draws(start, stop, wanted))
            for name, values in found.items():
                result[statistics.index(name), batch, start:stop] = values.T

    list(mapper(system_level, batches([rows.size for rows in group_rows])))
    # The widest batches first, so that the last to finish is a narrow one.
    scope_batches = batches([scope.size for scope in scopes])
    scope_batches.sort(key=lambda batch: -sum(scopes[p].size for p in batch))
    list(mapper(segment_level, scope_batches))
    # The system level pooled over each scope's groups.
    correlation, agreeing, compared, drawn = system
    membership = np.zeros((len(scopes), n_groups))
    for position, scope in enumerate(scopes):
        membership[position, np.unique(group_index[scope])] = 1
    pooled_agreeing, pooled_compared = agreeing @ membership.T, compared @ membership.T
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(pooled_compared > 0, pooled_agreeing / pooled_compared, np.nan)
    result[statistics.index("system_accuracy")] = accuracy.T
    # Pearson's r across systems: only where the resample holds one direction of the scope.
    defined = (drawn > 0) & np.isfinite(correlation)
    only = np.where(defined, correlation, 0.0) @ membership.T
    single = (drawn @ membership.T == 1) & (defined @ membership.T > 0)
    result[statistics.index("system_pearson")] = np.where(single, only, np.nan).T
    return result


BATCH_ROWS = 50_000
"""Scopes (or tests) are computed together up to about this many rows."""


def batches(widths: Sequence[int]) -> list[list[int]]:
    """Consecutive positions, grouped while their widths add up to at most BATCH_ROWS (a wider
    one alone)."""
    limit = BATCH_ROWS
    found: list[list[int]] = []
    total = 0
    for position, width in enumerate(widths):
        if not found or total + width > limit:
            found.append([])
            total = 0
        found[-1].append(position)
        total += width
    return found


def resampled_statistics(
    human: np.ndarray,
    metric: np.ndarray,
    items: np.ndarray,
    systems: np.ndarray,
    groups: np.ndarray,
    draws: np.ndarray,
) -> np.ndarray:
    """(statistics, resamples): each statistic of `Agreement.statistics()` of all the rows in
    each resample; `items` are codes 0..K-1 and `draws` is (resamples, K): how often each item
    is drawn."""
    if not human.size:
        return np.full((len(Agreement.statistics()), draws.shape[0]), np.nan)
    counts = draws.astype(np.int32)
    return scope_statistics(
        human,
        metric,
        items,
        systems,
        groups,
        [np.arange(human.size)],
        lambda start, stop, wanted: counts[start:stop][:, wanted],
        draws.shape[0],
    )[:, 0, :]
