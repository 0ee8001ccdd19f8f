"""MetricX-24 XL's achieved FLOP/s on a GPU, against the card's bfloat16 peak, and what each
change to the model's eager code buys, measured side by side in one run.

    python benchmarks/metricx_flops.py [--segments 4096] [--budget 16384] [--repeats 3]
        [--attention] [--compile] [--output flops.json]
    python benchmarks/metricx_flops.py --tiny      # every step on the CPU, tiny sizes

Builds MetricX-24 XL's mT5 (benchmarks/metricx_batching.py's `random_mt5`, random weights,
bfloat16) and scores the same synthetic BOUQuET-like segments (`input_lengths`) through
`MetricX.score_encoded` with token-budget batches, the model as transformers builds it, then
with each of `bouquet_eval.metrics.metricx`'s speed-ups applied in turn. FLOPs are counted
per batch from the model's shape (checked against torch's FlopCounterMode on one batch):
every matrix product of the encoder, the decoder's one step and its cross-attention over the
encoder's tokens, padding included. Every variant is measured warm: one pass untimed (each
batch shape's kernels chosen, the allocator's blocks taken), then `--repeats` timed passes in a
row, of which it prints the median with the least and the largest (the spread), the steady
state's seconds per batch, segments/s, TFLOP/s and the share of the card's dense bfloat16 peak
(`measuring.BF16_PEAK_TFLOPS`: 989 for an H100 or H200 SXM) and of an 8192^3 bfloat16 matrix
product measured in the same run, and the largest score difference from the model as built.
Results are in benchmarks/gpu_results.md.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from measuring import (
    BF16_PEAK_TFLOPS,
    bf16_peak_tflops,
    environment,
    markdown_table,
    matmul_tflops,
    repeated,
    timed,
    write_json,
)
from metricx_batching import TINY, XL, RandomMetricX, input_lengths, random_mt5

from bouquet_eval.metrics import metricx as metricx_module
from bouquet_eval.metrics.metricx import token_budget_batches

SPEC_PEAK_TFLOPS = BF16_PEAK_TFLOPS["H200"]
"""Where the card's name is not in `measuring.BF16_PEAK_TFLOPS`: an H100's or H200's."""


def batch_flops(config: Any, rows: int, width: int) -> float:
    """Multiply-adds x 2 of one forward pass of `rows` inputs padded to `width` tokens."""
    d, inner, ff = config.d_model, config.num_heads * config.d_kv, config.d_ff
    tokens = rows * width
    per_token = 2 * d * 3 * inner + 2 * inner * d + 3 * 2 * d * ff  # q, k, v, o; gated FFN
    attention = 2 * 2 * width * inner  # scores and the weighted sum, per query token
    encoder = config.num_layers * tokens * (per_token + attention)
    # One decoder step per row: its own layer on one token, and keys and values of the
    # cross-attention over every encoder token.
    step = per_token + 2 * d * inner * 2 + 2 * 2 * width * inner
    cross = 2 * 2 * d * inner * tokens
    decoder = config.num_decoder_layers * (rows * step + cross)
    head = rows * 2 * d * config.vocab_size
    return float(encoder + decoder + head)


def counted_flops(model: Any, rows: int, width: int, device: str) -> float:
    """torch's own count of one forward pass, to check `batch_flops`."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    ids = torch.randint(3, 100, (rows, width), device=device)
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        model(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            decoder_input_ids=torch.zeros((rows, 1), dtype=torch.long, device=device),
            use_cache=False,
        )
    return float(counter.get_total_flops())


def kernel_breakdown(device: str, work: Callable[[], Any], top: int = 12) -> str:
    """The kernels that took the most GPU time while `work` ran, with their shares."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    if device != "cuda":
        return "kernel breakdown: GPU only"
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        work()
    kernels = [
        event
        for event in profiler.key_averages()
        if event.device_time_total > 0 and event.device_type == DeviceType.CUDA
    ]
    # Operators carry their kernels' time too: count the kernels alone where they are told apart.
    events = kernels or [
        event for event in profiler.key_averages() if event.self_device_time_total > 0
    ]
    total = sum(event.device_time_total for event in events)
    events.sort(key=lambda event: event.device_time_total, reverse=True)
    lines = [f"kernel breakdown of 512 segments: {total / 1e3:.0f} ms of GPU time"]
    for event in events[:top]:
        share = 100 * event.device_time_total / total
        lines.append(f"  {share:5.1f}%  {event.count:6d}x  {event.key[:110]}")
    return "\n".join(lines)


def report(
    measured: list[dict[str, Any]],
    matmul: float | None,
    record: dict[str, Any],
    output: Path | None,
) -> None:
    """The table so far (a run stopped at its time limit still leaves it) and the JSON."""
    reference = measured[0]["scores"]
    peak = record["peak_tflops"]
    table = []
    for result in measured:
        difference = max(abs(a - b) for a, b in zip(result["scores"], reference, strict=True))
        table.append(
            [
                result["variant"],
                result["spread"],
                f"{1e3 * result['seconds_per_batch']:.1f}",
                f"{result['segments_per_s']:.1f}",
                f"{result['tflops']:.1f}",
                f"{100 * result['tflops'] / peak:.1f}%",
                "-" if matmul is None else f"{100 * result['tflops'] / matmul:.1f}%",
                "-" if result["peak_gib"] is None else f"{result['peak_gib']:.1f}",
                f"{difference:.2g}",
            ]
        )
    header = ["variant", "seconds, warm (median, range)", "ms per batch", "segments/s", "TFLOP/s"]
    header += [f"of {peak:.0f} peak", "of matmul", "peak GiB", "max score diff"]
    print(markdown_table(header, table), flush=True)
    write_json(output, {**record, "variants": measured}, leave_out="scores")


def attention_variants(
    metric: Any, sequences: Any, applied: list[str], run: Callable[[str], None]
) -> None:
    """Why SDPA takes the path it takes, and widths padded to a multiple of 16 tokens."""
    import warnings

    from torch.nn.attention import SDPBackend, sdpa_kernel

    for multiple in (1, 16):
        metric.pad_multiple = multiple
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
                    count = min(64, len(sequences))
                    metric.score_encoded(sequences[:count], [list(range(count))])
                print(f"pad multiple {multiple}: efficient attention runs", flush=True)
            except RuntimeError as error:
                print(f"pad multiple {multiple}: efficient attention refused: {error}")
        for warning in caught[:6]:
            print(f"  said: {str(warning.message)[:300]}", flush=True)
    metric.pad_multiple = 16
    run(" + ".join([*applied, "widths to a multiple of 16"]))
    try:
        with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
            run(" + ".join([*applied, "widths x16", "efficient attention forced"]))
    except RuntimeError as error:
        print(f"efficient attention forced: {error}", flush=True)
    metric.pad_multiple = 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--segments", type=int)
    parser.add_argument("--budget", type=int, default=16384)
    parser.add_argument("--compile", action="store_true", help="also try torch.compile")
    parser.add_argument("--attention", action="store_true", help="also try attention variants")
    parser.add_argument("--repeats", type=int, default=3, help="timed warm passes per variant")
    parser.add_argument("--output", type=Path)
    arguments = parser.parse_args()
    import numpy as np
    import torch

    device, dtype = ("cpu", "float32") if arguments.tiny else ("cuda", "bfloat16")
    shape = TINY if arguments.tiny else XL
    segments = arguments.segments or (96 if arguments.tiny else 4096)
    torch.manual_seed(0)
    model = random_mt5(shape, device, dtype)
    config = model.config
    setting = environment(device)
    print(setting, flush=True)
    block = model.encoder.block[0]
    print(
        f"attention: {config._attn_implementation}; FFN output (wo) weights "
        f"{block.layer[1].DenseReluDense.wo.weight.dtype}; activation "
        f"{type(block.layer[1].DenseReluDense.act).__name__}",
        flush=True,
    )
    lengths = input_lengths(segments, 0)
    ids = np.random.default_rng(0).integers(3, shape["vocab_size"], sum(lengths))
    offsets = np.cumsum([0, *lengths])
    sequences = [ids[start:end].tolist() for start, end in itertools.pairwise(offsets)]
    batches = token_budget_batches(lengths, arguments.budget)
    flops = sum(
        batch_flops(config, len(batch), max(lengths[index] for index in batch)) for batch in batches
    )
    rows, width = len(batches[-1]), max(lengths[index] for index in batches[-1])
    counted = counted_flops(model, rows, width, device)
    print(
        f"{segments} segments in {len(batches)} batches, {flops / 1e12:.1f} TFLOP; one batch "
        f"({rows} x {width}): counted {counted / 1e9:.1f} GFLOP, formula "
        f"{batch_flops(config, rows, width) / 1e9:.1f}",
        flush=True,
    )
    matmul = matmul_tflops(device)
    print("8192^3 bfloat16 matrix product: " + ("-" if matmul is None else f"{matmul:.0f} TFLOP/s"))
    peak = bf16_peak_tflops(device) or SPEC_PEAK_TFLOPS
    record = {"environment": setting, "matmul_tflops": matmul, "flops": flops, "peak_tflops": peak}
    metric = RandomMetricX(model, batch_tokens=arguments.budget)
    metric.score_encoded(sequences[:256], token_budget_batches(lengths[:256], arguments.budget))
    batches_512 = token_budget_batches(lengths[:512], arguments.budget)
    measured: list[dict[str, Any]] = []

    def run(name: str, repeats: int) -> None:
        def score() -> list[float]:
            return metric.score_encoded(sequences, batches)[0]

        cold, _ = timed(device, score)  # each batch shape's first run: not a steady state
        took, scores = repeated(device, score, repeats)
        print(f"{name}: first pass {cold.seconds:.2f} s, then {took.spread()}", flush=True)
        measured.append(
            {
                "variant": name,
                "first_pass_s": cold.seconds,
                **took.record(),
                "spread": took.spread(),
                "seconds_per_batch": took.median / len(batches),
                "segments_per_s": segments / took.median,
                "tflops": flops / took.median / 1e12,
                "scores": scores,
            }
        )
        report(measured, matmul, record, arguments.output)

    run("as transformers builds it", arguments.repeats)
    try:
        print(kernel_breakdown(device, lambda: metric.score_encoded(sequences[:512], batches_512)))
    except Exception as error:
        print(f"kernel breakdown failed: {error!r}")
    applied = []
    for name, speed_up in metricx_module.SPEED_UPS.items():
        speed_up(model)
        applied.append(name)
        run(" + ".join(applied), arguments.repeats)
    if arguments.attention:
        attention_variants(metric, sequences, applied, lambda name: run(name, arguments.repeats))
    if arguments.compile:
        started = time.perf_counter()
        metric._model = torch.compile(model, dynamic=True)
        run(" + ".join([*applied, "torch.compile"]), arguments.repeats)
        print(f"torch.compile: {time.perf_counter() - started:.0f} s with its passes")


if __name__ == "__main__":
    main()
