"""MetricX throughput: token-budget batches of length-sorted segments against fixed-size batches.

Builds a small random mT5 on CPU (bigger than the tests' one, so that the model's work outweighs
Python's) and a few hundred segments shaped like BOUQuET: mostly 10-40 words per side, and a
long tail of paragraphs of a few hundred words. Both plans score the same tokenized inputs with
the same model, interleaved; fixed-size batches take the segments in their given order, as many
per batch as the token-budget plan has on average. Prints segments/s and the share of real
(not padding) tokens of each (targets: >= 0.9 real/padded for the budget plan, >= 3x speed-up).

The test tokenizer's small vocabulary cuts a pseudo-word into four or five tokens, more than mT5
cuts a real word into, so the inputs are longer in tokens than BOUQuET's would be; at shorter
lengths attention weighs less and padding costs less in proportion.

    .venv/bin/python benchmarks/metricx_batching.py [--segments 240] [--batch-tokens 8192]
        [--repeats 2] [--threads N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import torch

from bouquet_eval.metrics.metricx import BatchCounts, MetricX, token_budget_batches

REPOSITORY = Path(__file__).resolve().parent.parent
# The test double's builder lives with the tests, outside the installed package.
sys.path.insert(0, str(REPOSITORY))
from tests.tiny_mt5 import build_tiny_mt5, pseudo_sentence  # noqa: E402

SIZE = dict(d_model=128, d_kv=32, d_ff=512, num_layers=3, num_decoder_layers=1, num_heads=4)


def bouquet_like_rows(count: int, seed: int) -> pd.DataFrame:
    """Source, candidate and reference of about the same number of words per row."""
    rng = random.Random(seed)
    triples = []
    for _ in range(count):
        # About one segment in thirty is a long passage rather than a sentence.
        words = rng.randint(100, 250) if rng.random() < 1 / 30 else rng.randint(10, 40)
        triples.append([pseudo_sentence(rng, max(1, words + rng.randint(-3, 3))) for _ in range(3)])
    src, mt, ref = zip(*triples, strict=True)
    return pd.DataFrame({"src_text": src, "mt_text": mt, "ref_text": ref})


def fixed_size_batches(count: int, size: int) -> list[list[int]]:
    return [list(range(start, min(start + size, count))) for start in range(0, count, size)]


def timed(
    metric: MetricX, sequences: Sequence[Sequence[int]], batches: list[list[int]]
) -> tuple[float, float, list[float], BatchCounts]:
    """Wall-clock and CPU seconds, scores and counts of one pass."""
    wall, cpu = time.perf_counter(), time.process_time()
    scores, counts = metric.score_encoded(sequences, batches)
    return time.perf_counter() - wall, time.process_time() - cpu, scores, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=240)
    parser.add_argument("--batch-tokens", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    arguments = parser.parse_args()
    if arguments.threads:
        torch.set_num_threads(arguments.threads)

    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        checkpoint = build_tiny_mt5(Path(scratch), seed=arguments.seed, size=SIZE)
        print(f"built a random mT5 {SIZE} in {time.perf_counter() - started:.1f} s")
        metric = MetricX(
            model=str(checkpoint.model),
            tokenizer=str(checkpoint.tokenizer),
            device="cpu",
            batch_tokens=arguments.batch_tokens,
        )
        rows = bouquet_like_rows(arguments.segments, arguments.seed)
        sequences = metric.encode(rows)

    lengths = [len(sequence) for sequence in sequences]
    plans = {"token budget, sorted": token_budget_batches(lengths, arguments.batch_tokens)}
    per_batch = round(len(sequences) / len(plans["token budget, sorted"]))
    plans[f"fixed {per_batch}, unsorted"] = fixed_size_batches(len(sequences), per_batch)
    quantiles = statistics.quantiles(lengths, n=10)
    print(
        f"{len(sequences)} segments, tokens per input: median {statistics.median(lengths):.0f}, "
        f"90th percentile {quantiles[-1]:.0f}, max {max(lengths)}; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    )

    timed(metric, sequences[:1], [[0]])  # warm-up: the first forward pass pays one-off costs
    passes: dict[str, list[tuple[float, float]]] = {name: [] for name in plans}
    results: dict[str, tuple[list[float], BatchCounts]] = {}
    # Interleaved, so that a spell of load from other processes falls on both plans.
    for _ in range(arguments.repeats):
        for name, batches in plans.items():
            wall, cpu, scores, counts = timed(metric, sequences, batches)
            passes[name].append((wall, cpu))
            results[name] = (scores, counts)

    print(
        f"{'plan':<22} {'batches':>7} {'seg/batch':>9} {'real/padded':>11} "
        f"{'wall s':>7} {'CPU s':>7} {'segments/s':>10}"
    )
    best = {name: min(passes[name]) for name in plans}
    for name, batches in plans.items():
        wall, cpu = best[name]
        print(
            f"{name:<22} {len(batches):>7} {len(sequences) / len(batches):>9.1f} "
            f"{results[name][1].real_ratio:>11.3f} {wall:>7.2f} {cpu:>7.2f} "
            f"{len(sequences) / wall:>10.1f}"
        )
    budget, fixed = plans
    difference = max(abs(a - b) for a, b in zip(results[budget][0], results[fixed][0], strict=True))
    print(
        f"speed-up {best[fixed][0] / best[budget][0]:.2f}x in wall-clock time, "
        f"{best[fixed][1] / best[budget][1]:.2f}x in CPU time (target >= 3x); "
        f"real/padded {results[budget][1].real_ratio:.3f} with the token budget (target >= 0.9)"
    )
    print(
        f"fastest of {arguments.repeats} passes per plan; "
        f"largest score difference between the plans {difference:.1e}"
    )


if __name__ == "__main__":
    main()
