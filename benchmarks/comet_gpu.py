"""COMET-22 and xCOMET-XL on a GPU: the project's scoring against unbabel-comet's own
`comet-score`, warm against warm and cold against cold, on the same segments, in one run.

    python benchmarks/comet_gpu.py --shape comet|xcomet [--segments 1920] [--direction 480]
        [--budgets 8192,16384,32768] [--repeats 3] [--cold-repeats 3] [--output comet.json]
    python benchmarks/comet_gpu.py --shape comet --tiny --segments 96 --direction 32
        # every step on the CPU with tiny sizes: a smoke test

Needs the COMET environment (unbabel-comet, transformers 4). Builds a checkpoint of the
released model's shape with random weights (COMET-22: XLM-R large, 24 layers of 1024;
xCOMET-XL: XLM-R XL, 36 layers of 2560; their vocabularies), laid out as its Hub repository
is, and scores the bundled sample's sentence pairs, copied (each copy marked, so that no
sentence repeats) up to `--segments`, the rows of a direction `--direction` at a time as score
jobs take them. Two sides, each on a model loaded as it loads it:

- ours: `CometMetric.score` per direction, bfloat16 (the `auto` precision on a GPU), batches
  sorted by length and sized by tokens, at each budget of `--budgets` (the first is the
  default's place in the table);
- comet-score: the model as `comet-score` loads it (`model.half()`: float16) and its
  `predict` over every segment, batches of 16, as the command runs it (each call builds its
  Lightning Trainer, which moves the model to the GPU and back).

Cold: the first call on a freshly loaded model (the CUDA context made beforehand by a matrix
product, so that neither side pays for it), `--cold-repeats` times for each side, a fresh load
each time. Warm: after that first call, `--repeats` calls in a row on the same model: the
steady state. Each is printed as its median with the least and the largest (the spread); the
steady state also as seconds per batch, segments/s and, from FLOPs counted by torch's
FlopCounterMode over one untimed pass (matrix products and attention, padding included), the
share of the card's dense bfloat16 peak (`measuring.BF16_PEAK_TFLOPS`) and of an 8192^3
bfloat16 matrix product measured in the same run. The ratios warm/warm and cold/cold close
it, with the largest score difference between the sides.

Random weights do the work trained ones do; the tokenizer is the tests' small sentencepiece
model, which cuts sentences into more tokens than XLM-R's (the mean per segment is printed),
so absolute rates are lower than the released models' on the same text. Results are in
benchmarks/gpu_results.md.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))
from measuring import (  # noqa: E402
    Repeated,
    bf16_peak_tflops,
    environment,
    markdown_table,
    matmul_tflops,
    repeated,
    timed,
    write_json,
)

from bouquet_eval.metrics.comet import CHECKPOINT, CometMetric, XComet  # noqa: E402
from tests.comet_checkpoints import build_checkpoint, build_encoder  # noqa: E402
from tests.comet_reference import sample_pairs  # noqa: E402


@dataclass(frozen=True)
class Released:
    """A released model's shape: its metric, its encoder's settings and its head's."""

    metric: type[CometMetric]
    xl: bool
    encoder: dict[str, Any]
    head: dict[str, Any]


RELEASED = {
    "comet": Released(
        metric=CometMetric,
        xl=False,
        encoder=dict(
            vocab_size=250002,
            hidden_size=1024,
            num_hidden_layers=24,
            num_attention_heads=16,
            intermediate_size=4096,
            max_position_embeddings=514,
        ),
        head=dict(hidden_sizes=[3072, 1024]),
    ),
    "xcomet": Released(
        metric=XComet,
        xl=True,
        encoder=dict(
            vocab_size=250880,
            hidden_size=2560,
            num_hidden_layers=36,
            num_attention_heads=32,
            intermediate_size=10240,
            max_position_embeddings=514,
        ),
        head=dict(hidden_sizes=[3072, 1024], word_layer=36),
    ),
}


def unique_rows(count: int) -> Any:
    import pandas as pd

    pairs = sample_pairs()
    copies = []
    for copy in range(-(-count // len(pairs))):
        marked = pairs.copy()
        if copy:
            for column in ("src_text", "mt_text", "ref_text"):
                marked[column] = marked[column] + f" ({copy})"
        copies.append(marked)
    return pd.concat(copies, ignore_index=True).head(count)


def directions(rows: Any, size: int) -> list[Any]:
    return [rows.iloc[start : start + size] for start in range(0, len(rows), size)]


def counted_flops(work: Callable[[], Any]) -> float:
    """torch's own count of the FLOPs of `work()` (matrix products and attention)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        work()
    return float(counter.get_total_flops())


@dataclass
class Side:
    """One side of the comparison: how it loads its model and scores every segment."""

    name: str
    load: Callable[[], Any]
    score: Callable[[Any], list[float]]
    batches: Callable[[Any], int]


def measure_side(
    side: Side, device: str, segments: int, repeats: int, cold_repeats: int
) -> dict[str, Any]:
    """Cold: the first call on a freshly loaded model, `cold_repeats` times (none: the model
    `side.load` gives is used as it is); warm: `repeats` calls in a row after it, on the last
    model loaded."""
    import torch

    def first_call() -> tuple[float, Any]:
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
        model = side.load()
        took, _ = timed(device, lambda: side.score(model))
        return took.seconds, model

    colds = []
    model = None if cold_repeats else side.load()
    for _ in range(cold_repeats):
        seconds, model = first_call()
        colds.append(seconds)
    warm, scores = repeated(device, lambda: side.score(model), repeats)
    cold = Repeated(colds, None) if colds else None
    batches = side.batches(model)
    cold_spread = cold.spread() if cold else "-"
    print(f"{side.name}: cold {cold_spread}; warm {warm.spread()}", flush=True)
    return {
        "plan": side.name,
        "segments": segments,
        "cold": cold.record() if cold else None,
        "cold_spread": cold_spread,
        "warm": warm.record(),
        "warm_spread": warm.spread(),
        "batches": batches,
        "seconds_per_batch": warm.median / batches,
        "segments_per_s": segments / warm.median,
        "peak_gib": warm.peak_gib,
        "scores": scores,
    }


def comet_score_model(folder: Path, device: str) -> Any:
    """The model as `comet-score` loads it: float16 (`model.half()`), in eval mode."""
    from comet import load_from_checkpoint

    model = load_from_checkpoint(str(folder / CHECKPOINT), local_files_only=True)
    model.half()
    return model.eval()


def comet_score_predict(model: Any, samples: list[dict[str, str]], device: str) -> list[float]:
    """`comet-score`'s call: one `predict` over every segment, batches of 16, its defaults."""
    with contextlib.redirect_stdout(io.StringIO()):
        prediction = model.predict(
            samples, batch_size=16, gpus=1 if device == "cuda" else 0, progress_bar=False
        )
    return [float(score) for score in prediction.scores]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(RELEASED), required=True)
    parser.add_argument("--segments", type=int, default=1920)
    parser.add_argument("--direction", type=int, default=480, help="segments per direction")
    parser.add_argument("--budgets", default="16384,8192,32768", help="ours: batch_tokens")
    parser.add_argument("--repeats", type=int, default=3, help="warm calls per side")
    parser.add_argument("--cold-repeats", type=int, default=3, help="fresh loads per side")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes, on the CPU")
    parser.add_argument("--output", type=Path)
    arguments = parser.parse_args()
    import torch

    device = "cpu" if arguments.tiny else "cuda"
    released = RELEASED[arguments.shape]
    metric_class = released.metric
    rows = unique_rows(arguments.segments)
    per_direction = directions(rows, arguments.direction)
    setting = environment(device)
    print(setting, flush=True)
    peak = bf16_peak_tflops(device)
    matmul = matmul_tflops(device)  # also makes the CUDA context, before either side's cold
    record: dict[str, Any] = {
        "environment": setting,
        "shape": arguments.shape,
        "peak_tflops": peak,
        "matmul_tflops": matmul,
    }
    with tempfile.TemporaryDirectory() as temporary:
        work = Path(temporary)
        start = time.perf_counter()
        encoder = build_encoder(
            work / "encoder", released.xl, config=None if arguments.tiny else released.encoder
        )
        folder = build_checkpoint(
            work / arguments.shape,
            arguments.shape,
            encoder,
            settings=None if arguments.tiny else released.head,
            device=device,
            dtype="bfloat16",
        )
        built = time.perf_counter() - start
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(encoder))
        columns = ["src_text", "mt_text"] + (["ref_text"] if metric_class.uses_reference else [])
        tokens = sum(
            len(ids) for column in columns for ids in tokenizer(list(rows[column]))["input_ids"]
        )
        record["tokens_per_segment"] = tokens / len(rows)
        print(
            f"{arguments.shape}: checkpoint built and saved in {built:.0f} s; {len(rows)} "
            f"segments, {tokens / len(rows):.0f} tokens each ({', '.join(columns)})",
            flush=True,
        )
        budgets = [int(budget) for budget in arguments.budgets.split(",")]
        metric = metric_class(model=str(folder), device=device, batch_tokens=budgets[0])

        def ours_load() -> Any:
            metric._model = None
            return metric.load()

        def ours_score(model: Any) -> list[float]:
            return [s for part in per_direction for s in metric.score(part)[metric.name]]

        def ours_batches(model: Any) -> int:
            return sum(len(metric.batches(model, metric.samples(part))) for part in per_direction)

        samples = metric.samples(rows)
        theirs = Side(
            "comet-score, float16, batches of 16",
            lambda: comet_score_model(folder, device),
            lambda model: comet_score_predict(model, samples, device),
            lambda model: -(-len(samples) // 16),
        )
        results = []
        for number, budget in enumerate(budgets):
            metric.batch_tokens = budget
            name = f"ours, batch_tokens {budget}, {metric.resolved_precision()}"
            # Cold once, at the first budget: the model then stays loaded.
            cold_repeats = arguments.cold_repeats if number == 0 else 0
            side = Side(name, ours_load if number == 0 else metric.load, ours_score, ours_batches)
            result = measure_side(side, device, len(rows), arguments.repeats, cold_repeats)
            flops = counted_flops(lambda: ours_score(metric.load()))
            result["tflops"] = flops / result["warm"]["median_s"] / 1e12
            results.append(result)
        metric._model = None
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
        results.append(
            measure_side(theirs, device, len(rows), arguments.repeats, arguments.cold_repeats)
        )
        reference = results[-1]["scores"]
        table = []
        for result in results:
            difference = max(abs(a - b) for a, b in zip(result["scores"], reference, strict=True))
            tflops = result.get("tflops")
            table.append(
                [
                    result["plan"],
                    result["cold_spread"],
                    result["warm_spread"],
                    f"{1e3 * result['seconds_per_batch']:.1f}",
                    f"{result['segments_per_s']:.1f}",
                    "-" if tflops is None else f"{tflops:.1f}",
                    "-" if tflops is None or peak is None else f"{100 * tflops / peak:.1f}%",
                    "-" if tflops is None or matmul is None else f"{100 * tflops / matmul:.1f}%",
                    "-" if result["peak_gib"] is None else f"{result['peak_gib']:.2f}",
                    f"{difference:.3g}",
                ]
            )
        header = ["plan", "cold s (median, range)", "warm s (median, range)", "ms per batch"]
        header += ["warm segments/s", "TFLOP/s", "of bf16 peak", "of matmul", "peak GiB"]
        header += ["max |score - comet-score|"]
        print(markdown_table(header, table))
        ours, comet = results[0], results[-1]
        record["warm_ratio"] = comet["warm"]["median_s"] / ours["warm"]["median_s"]
        record["cold_ratio"] = comet["cold"]["median_s"] / ours["cold"]["median_s"]
        print(
            f"ours at batch_tokens {budgets[0]} against comet-score: warm against warm "
            f"{record['warm_ratio']:.2f}x its segments/s, cold against cold "
            f"{record['cold_ratio']:.2f}x",
            flush=True,
        )
        record["plans"] = results
        write_json(arguments.output, record, leave_out="scores")


if __name__ == "__main__":
    main()
