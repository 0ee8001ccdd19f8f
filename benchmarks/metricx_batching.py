"""MetricX-24 throughput: token-budget batches of length-sorted segments against fixed batches.

Builds an mT5 of MetricX-24 XL's shape (`google/metricx-24-hybrid-xl-v2p6`: d_model 2048,
d_ff 5120, 24 + 24 layers, 32 heads, d_kv 64, vocabulary 250112, gated GELU) with random
weights in bfloat16 on the GPU, or a tiny one in float32 on the CPU with `--tiny`, and scores
the same synthetic segments through `MetricX.score_encoded` (the scoring path: padding, the
forward pass, the score read) under several plans:

- token budget B, sorted: `token_budget_batches` (what scoring does, `metricx.batch_tokens`);
- fixed k, unsorted: k segments per batch in the given order (k = 1 is the official
  `predict.py --batch_size 1`; k = 1 runs on the first `--single-segments` segments only).

Random weights do the same work as trained ones; only the lengths matter, so the segments are
random ids with BOUQuET-like token counts (see `input_lengths`). Prints segments/s, real (not
padding) tokens/s, the real/padded ratio and peak GPU memory per plan, fastest of `--repeats`
interleaved passes, and the largest score difference from the first plan. A default run
takes about 9 minutes on an H100; results and the choice of `metricx.batch_tokens` are in
benchmarks/gpu_results.md.

    python benchmarks/metricx_batching.py [--tiny] [--segments 4096] [--repeats 2]
        [--budgets 4096,8192,16384,32768,65536] [--fixed 1,16,64] [--output results.json]
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from measuring import environment, is_out_of_memory, markdown_table, timed, write_json

from bouquet_eval.metrics.metricx import (
    MAX_INPUT_TOKENS,
    BatchCounts,
    MetricX,
    token_budget_batches,
)

XL = dict(
    vocab_size=250112,
    d_model=2048,
    d_ff=5120,
    d_kv=64,
    num_heads=32,
    num_layers=24,
    num_decoder_layers=24,
)
TINY = dict(vocab_size=512, d_model=64, d_ff=128, d_kv=16, num_heads=4, num_layers=2)
MT5_SCORE_ID = 250089
BUDGETS = "4096,8192,16384,32768,65536"


class RandomMetricX(MetricX):
    """MetricX over a model built in memory rather than loaded from a checkpoint."""

    def __init__(self, model: Any, batch_tokens: int) -> None:
        super().__init__(model="random", device=str(model.device), batch_tokens=batch_tokens)
        self._model = model
        self._score_id = min(MT5_SCORE_ID, model.config.vocab_size - 1)


def random_mt5(shape: dict[str, Any], device: str, dtype: str) -> Any:
    import torch
    from transformers import MT5Config, MT5ForConditionalGeneration

    config = MT5Config(feed_forward_proj="gated-gelu", tie_word_embeddings=False, **shape)
    # Initialised where it runs: an XL's 3.7 B parameters take minutes on a CPU.
    with torch.device(device):
        model = MT5ForConditionalGeneration(config)
    return model.to(getattr(torch, dtype)).eval()


def input_lengths(count: int, seed: int) -> list[int]:
    """Tokens per MetricX input (source + candidate + reference + the prompt's words).

    Each side of a BOUQuET sentence: log-normal around 32 mT5 tokens (about 20 words at 1.6
    tokens a word; 90% between 13 and 80). The candidate follows the reference's length, and
    one in fifty is a runaway generation of 200 to 1000 tokens, as LLM output has. Cut at the
    model's limit as scoring cuts it.
    """
    rng = random.Random(seed)
    lengths = []
    for _ in range(count):
        source, reference = (round(rng.lognormvariate(math.log(32), 0.55)) for _ in range(2))
        candidate = round(reference * rng.lognormvariate(0, 0.2))
        if rng.random() < 1 / 50:
            candidate = rng.randint(200, 1000)
        prompt_words = 8
        lengths.append(min(source + candidate + reference + prompt_words, MAX_INPUT_TOKENS - 1))
    return lengths


def numbers(listed: str) -> list[int]:
    return [int(value) for value in listed.split(",")]


def fixed_size_batches(count: int, size: int) -> list[list[int]]:
    return [list(range(start, min(start + size, count))) for start in range(0, count, size)]


def plans(
    lengths: Sequence[int], budgets: Sequence[int], sizes: Sequence[int], single_segments: int
) -> dict[str, list[list[int]]]:
    chosen = {
        f"budget {budget}, sorted": token_budget_batches(lengths, budget) for budget in budgets
    }
    for size in sizes:
        count = min(single_segments, len(lengths)) if size == 1 else len(lengths)
        chosen[f"fixed {size}, unsorted"] = fixed_size_batches(count, size)
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny model on the CPU")
    # Defaults: (GPU, --tiny); the tiny ones make a run of seconds, for a smoke test.
    parser.add_argument("--segments", type=int, help="default: 4096 (64 with --tiny)")
    parser.add_argument(
        "--single-segments", type=int, help="scored one by one; default: 512 (16 with --tiny)"
    )
    parser.add_argument("--budgets", help="default: 4096,8192,16384,32768,65536 (2048,8192)")
    parser.add_argument("--fixed", help="batch sizes; default: 1,16,64 (1,8)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, help="write the numbers here as JSON")
    arguments = parser.parse_args()
    import numpy as np
    import torch

    device, dtype = ("cpu", "float32") if arguments.tiny else ("cuda", "bfloat16")
    shape = TINY if arguments.tiny else XL
    segments = arguments.segments or (64 if arguments.tiny else 4096)
    single_segments = arguments.single_segments or (16 if arguments.tiny else 512)
    budgets = numbers(arguments.budgets or ("2048,8192" if arguments.tiny else BUDGETS))
    sizes = numbers(arguments.fixed or ("1,8" if arguments.tiny else "1,16,64"))
    torch.manual_seed(arguments.seed)
    built, model = timed(device, lambda: random_mt5(shape, device, dtype))
    parameters = sum(parameter.numel() for parameter in model.parameters())
    weights_gib = torch.cuda.memory_allocated(device) / 2**30 if device == "cuda" else None
    setting = environment(device)
    print(
        f"{setting}\nrandom mT5 {shape}, {parameters / 1e9:.2f} B parameters, {dtype}, "
        f"built in {built.seconds:.1f} s"
        + (f"; weights {weights_gib:.1f} GiB" if weights_gib is not None else "")
    )

    lengths = input_lengths(segments, arguments.seed)
    ids = np.random.default_rng(arguments.seed).integers(3, shape["vocab_size"], sum(lengths))
    offsets = np.cumsum([0, *lengths])
    sequences = [ids[start:end].tolist() for start, end in itertools.pairwise(offsets)]
    deciles = statistics.quantiles(lengths, n=10)
    print(
        f"{segments} segments, tokens per input: median {statistics.median(lengths):.0f}, "
        f"mean {statistics.mean(lengths):.0f}, 10th-90th percentile {deciles[0]:.0f}-"
        f"{deciles[-1]:.0f}, max {max(lengths)}"
    )
    chosen = plans(lengths, budgets, sizes, single_segments)
    metric = RandomMetricX(model, batch_tokens=budgets[0])

    # Warm-up: the first passes pay for kernel selection and the allocator's first blocks.
    warm = min(256, segments)
    metric.score_encoded(sequences[:warm], token_budget_batches(lengths[:warm], budgets[0]))
    measured: dict[str, dict[str, Any]] = {}
    record = {
        "environment": setting,
        "shape": shape,
        "dtype": dtype,
        "parameters": parameters,
        "weights_gib": weights_gib,
        "lengths": {"median": statistics.median(lengths), "mean": statistics.mean(lengths)},
        "plans": measured,
    }
    for repeat in range(1, arguments.repeats + 1):
        for name, batches in chosen.items():
            if "error" not in measured.get(name, {}):
                measure_plan(metric, device, sequences, name, batches, measured)
        # After every pass, so that a run stopped at its time limit still leaves numbers.
        print(markdown_table(HEADER, table(measured)))
        print(f"fastest of {repeat} interleaved passes; score difference from the first plan")
        write_json(arguments.output, record, leave_out="scores")


def measure_plan(
    metric: MetricX,
    device: str,
    sequences: Sequence[Sequence[int]],
    name: str,
    batches: list[list[int]],
    measured: dict[str, dict[str, Any]],
) -> None:
    """Score under one plan; keep its fastest pass in `measured[name]`."""
    import torch

    # Every plan covers a prefix of the segments (fixed 1 a shorter one).
    subset = sequences[: sum(len(batch) for batch in batches)]
    try:
        took, (scores, counts) = timed(device, lambda: metric.score_encoded(subset, batches))
    except RuntimeError as error:
        if not is_out_of_memory(error):
            raise
        torch.cuda.empty_cache()
        measured[name] = {"error": "out of memory"}
        return
    print(f"{name}: {took.seconds:.2f} s", flush=True)
    passes = measured.get(name, {}).get("passes", 0) + 1
    if name not in measured or took.seconds < measured[name]["seconds"]:
        measured[name] = summary(took, counts, scores)
    measured[name]["passes"] = passes


HEADER = (
    "plan",
    "segments",
    "batches",
    "segments/s",
    "real tokens/s",
    "real/padded",
    "peak GiB",
    "max score diff",
)


def table(measured: dict[str, dict[str, Any]]) -> list[list[Any]]:
    reference = next(iter(measured.values())).get("scores", [])
    rows: list[list[Any]] = []
    for name, result in measured.items():
        if "error" in result:
            rows.append([name, "-", "-", "-", "-", "-", result["error"], "-"])
            continue
        # Plans cover prefixes of the segments: compare what both scored.
        pairs = zip(reference, result["scores"], strict=False)
        result["max_difference"] = max((abs(a - b) for a, b in pairs), default=float("nan"))
        peak = result["peak_gib"]
        rows.append(
            [
                name,
                result["segments"],
                result["batches"],
                f"{result['segments_per_s']:.1f}",
                f"{result['real_tokens_per_s']:.0f}",
                f"{result['real_ratio']:.3f}",
                "-" if peak is None else f"{peak:.1f}",
                f"{result['max_difference']:.2g}",
            ]
        )
    return rows


def summary(took: Any, counts: BatchCounts, scores: list[float]) -> dict[str, Any]:
    return {
        "seconds": took.seconds,
        "peak_gib": took.peak_gib,
        "segments": counts.segments,
        "batches": counts.batches,
        "segments_per_s": counts.segments / took.seconds,
        "real_tokens_per_s": counts.real_tokens / took.seconds,
        "real_ratio": counts.real_ratio,
        "scores": scores,
    }


if __name__ == "__main__":
    main()
