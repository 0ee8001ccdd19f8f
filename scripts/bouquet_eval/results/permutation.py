"""Paired permutation tests of two metrics' agreement with people, after MTME's PermutationSigDiff.

Each trial swaps the two metrics' standardized scores of a random half of the segments; p is
the share of trials, the observed one counted, whose difference is at least the observed (MTME
counts the trials alone, and stops early once p is clearly small or large).

A trial's swapped metric takes each row's score from one metric or the other: it is the
statistic of both metrics' rows (`weighted_agreement.SegmentedRows`), weighted 1 where taken
and 0 where not, and the other swapped metric weighs them the other way. For acc-eq, a pair
of rows takes one of four differences (each row's score from either metric), weighted the
same way (`weighted_agreement.PairAccuracy`). So every trial of every test of a run is a row
of 0/1 weights over sorts done once: the tests are the segments of one computation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from bouquet_eval.results.agreement import item_pairs, run_starts, segment_statistic
from bouquet_eval.results.weighted_agreement import (
    Mapper,
    PairAccuracy,
    Pairs,
    SegmentedRows,
    batches,
    chunks,
    item_shares,
)

MASK_BLOCK = 25
"""Trials whose swaps are drawn at once (the draws are those of all trials at once)."""


def swap_masks(seed: int, trials: int, size: int) -> np.ndarray:
    """(trials, size) booleans: where a permutation trial swaps the two metrics' scores."""
    return np.concatenate(list(_mask_blocks(seed, trials, size)))


def _mask_blocks(seed: int, trials: int, size: int) -> Iterator[np.ndarray]:
    """`swap_masks`, MASK_BLOCK trials at a time."""
    rng = np.random.default_rng([seed, size, 3])
    for start in range(0, trials, MASK_BLOCK):
        yield rng.integers(2, size=(min(MASK_BLOCK, trials - start), size)).astype(bool)


def standardized(values: np.ndarray) -> np.ndarray:
    """z-scores: swapping two metrics' scores needs them on one scale; no statistic changes."""
    spread = values.std()
    return (values - values.mean()) / spread if spread > 0 else values - values.mean()


@dataclass(frozen=True)
class PairedTest:
    """The rows both metrics scored: human scores, the best and the other metric's scores, and
    an item code per row (acc-eq's pairs are within items)."""

    human: np.ndarray
    best: np.ndarray
    other: np.ndarray
    items: np.ndarray


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
    p-value of the paired permutation test."""
    return permutation_tests(statistic, [PairedTest(human, best, other, items)], seed, trials)[0]


def permutation_tests(
    statistic: str,
    tests: Sequence[PairedTest],
    seed: int,
    trials: int,
    mapper: Mapper = map,
) -> list[tuple[float, float]]:
    """`permutation_p` of every test, computed together (batches of tests run by `mapper`)."""
    results = []
    runnable = []
    for test in tests:
        a, b = standardized(test.best), standardized(test.other)
        observed = segment_statistic(statistic, test.human, a, test.items) - segment_statistic(
            statistic, test.human, b, test.items
        )
        results.append((observed, float("nan")))
        if np.isfinite(observed):
            runnable.append((len(results) - 1, test, a, b, observed))

    def run(batch: list[int]) -> None:
        chosen = [runnable[position] for position in batch]
        computation = _Batch(statistic, [(test, a, b) for _, test, a, b, _ in chosen])
        observed = np.array([value for *_, value in chosen])
        at_least = computation.count_at_least(observed, seed, trials)
        for (index, *_), count in zip(chosen, at_least, strict=True):
            results[index] = (results[index][0], float((count + 1) / (trials + 1)))

    # A batch of tests at a time (or one wide test), so that each pass stays in the cache;
    # the widest first, so that the last to finish is a narrow one.
    sizes = [test.human.size for _, test, *_ in runnable]
    ordered = sorted(batches(sizes), key=lambda b: -sum(sizes[p] for p in b))
    list(mapper(run, ordered))
    return results


class _Batch:
    """Tests as the segments of one weighted computation. Candidate scores are columns of the
    weight matrix: for rows, each row's score from `best` (column r) or `other` (N + r); for
    acc-eq's pairs, candidate c of pair p (column c * P + p) takes the first row's score from
    `other` where c >= 2 and the second row's where c is odd."""

    def __init__(
        self, statistic: str, tests: Sequence[tuple[PairedTest, np.ndarray, np.ndarray]]
    ) -> None:
        self.statistic = statistic
        sizes = np.array([test.human.size for test, _, _ in tests])
        self.sizes = sorted(set(sizes.tolist()))
        # Each row's mask column: its position in its size's block of swaps.
        offsets = dict(zip(self.sizes, np.cumsum([0, *self.sizes[:-1]]), strict=True))
        self.mask_index = np.concatenate([offsets[size] + np.arange(size) for size in sizes])
        segment = np.repeat(np.arange(len(tests)), sizes)
        human = np.concatenate([test.human for test, _, _ in tests])
        a = np.concatenate([a for _, a, _ in tests])
        b = np.concatenate([b for _, _, b in tests])
        rows = human.size
        if statistic == "acc_eq":
            # Items apart per test (a test's item codes are its own); pairs by test.
            span = max(int(test.items.max(initial=0)) + 1 for test, _, _ in tests)
            items = np.concatenate([test.items for test, _, _ in tests]) + segment * span
            first, second = item_pairs(items)
            by_test = np.argsort(segment[first], kind="stable")
            self.first, self.second = first[by_test], second[by_test]
            count = self.first.size
            share = item_shares(items[self.first])
            candidates = [
                (b if c >= 2 else a)[self.first] - (b if c % 2 else a)[self.second]
                for c in range(4)
            ]
            human_delta = np.tile(human[self.first] - human[self.second], 4)
            pairs = Pairs(
                human_delta,
                np.concatenate(candidates),
                np.arange(4 * count),
                np.tile(segment[self.first], 4),
                np.tile(share, 4),
            )
            self.accuracy = PairAccuracy(pairs, len(tests))
            # In the sorted order: each candidate's pair, and which candidate it is.
            self.pair_at = self.accuracy.columns % count
            self.candidate_at = (self.accuracy.columns // count).astype(np.int8)
            # Per pair and candidate (pair * 4 + c): whether the metric orders it as people.
            metric_delta = np.stack(candidates, axis=1).ravel()
            human_delta = np.repeat(human_delta[:count], 4)
            agrees = (
                (human_delta != 0)
                & (np.sign(human_delta) == np.sign(metric_delta))
                & (metric_delta != 0)
            ).astype(np.int32)
            # What swapping `best` (candidate c) gains over swapping `other` (3 - c), by share.
            lead = agrees - agrees.reshape(-1, 4)[:, ::-1].ravel()
            self.agreeing_lead = lead * np.repeat(share, 4)
            self.pair_base = 4 * np.arange(count)
            self.first_mask = self.mask_index[self.first]
            self.second_mask = self.mask_index[self.second]
            self.test_starts = run_starts(segment[self.first])
            self.test_items = np.add.reduceat(share, self.test_starts)
            self.width = 4 * count
        else:
            # Both metrics' rows of a test together: a segment's rows are contiguous.
            order = np.argsort(np.concatenate([segment, segment]), kind="stable")
            self.segmented = SegmentedRows(
                np.concatenate([human, human])[order],
                np.concatenate([a, b])[order],
                np.arange(2 * rows)[order],
                np.concatenate([segment, segment])[order],
            )
            self.width = 2 * rows

    def count_at_least(self, observed: np.ndarray, seed: int, trials: int) -> np.ndarray:
        """Per test: the trials whose difference is at least the observed one."""
        at_least = np.zeros(observed.size, np.int64)
        tolerance = 1e-9 * np.maximum(np.abs(observed), 1.0)
        blocks = [_mask_blocks(seed, trials, size) for size in self.sizes]
        for _ in range(0, trials, MASK_BLOCK):
            swaps = np.concatenate([next(block) for block in blocks], axis=1)
            for start, stop in chunks(len(swaps), self.width):
                delta = self._deltas(swaps[start:stop])
                at_least += (delta >= observed - tolerance).sum(axis=0)
        return at_least

    def _deltas(self, swaps: np.ndarray) -> np.ndarray:
        """(trials, tests): the statistic of swapped `best` minus that of swapped `other`;
        `swaps` are the trials' swaps of each size, side by side."""
        if self.statistic == "acc_eq":
            # Swapped `best` takes candidate c of each pair, swapped `other` 3 - c.
            candidate = 2 * np.take(swaps, self.first_mask, axis=1).astype(np.int8)
            candidate += np.take(swaps, self.second_mask, axis=1)
            at = np.take(candidate, self.pair_at, axis=1)
            gain = self.accuracy.gain(at == self.candidate_at)
            gain -= self.accuracy.gain(at == 3 - self.candidate_at)
            lead = np.take(self.agreeing_lead, self.pair_base + candidate)
            agreeing = np.add.reduceat(lead, self.test_starts, axis=1)
            return (agreeing + gain) / self.test_items
        swapped = np.take(swaps, self.mask_index, axis=1)
        kept = (~swapped).astype(np.int32)
        moved = swapped.astype(np.int32)
        wanted = (self.statistic,)
        mine = self.segmented.statistics(np.concatenate([kept, moved], axis=1), wanted)
        theirs = self.segmented.statistics(np.concatenate([moved, kept], axis=1), wanted)
        return mine[self.statistic] - theirs[self.statistic]
