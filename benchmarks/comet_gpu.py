"""COMET-22 and xCOMET-XL on a GPU: segments per second and memory of the project's scoring
against unbabel-comet's own `comet-score`, on the same segments, in one run.

    python benchmarks/comet_gpu.py --shape comet|xcomet [--segments 1920] [--direction 480]
        [--batch-sizes 16,32,64,128] [--output comet.json]
    python benchmarks/comet_gpu.py --shape comet --tiny --segments 96 --direction 32
        # every step on the CPU with tiny sizes: a smoke test

Needs the COMET environment (unbabel-comet, transformers 4). Builds a checkpoint of the
released model's shape with random weights (COMET-22: XLM-R large, 24 layers of 1024;
xCOMET-XL: XLM-R XL, 36 layers of 2560; their vocabularies), laid out as its Hub repository
is, and scores the bundled sample's sentence pairs, copied (each copy marked, so that no
sentence repeats) up to `--segments`:

- `comet-score` (run in this process through its own command function, so that its `predict`
  can be timed): float16, batches of 16, one `predict` for all segments, as it runs;
- unbabel-comet's `predict` called once per direction of `--direction` segments, as the
  project's score jobs called it before: each call builds a Lightning Trainer, which moves
  the model to the GPU and back;
- the project's `CometMetric.score` per direction, at each batch size in `--batch-sizes`.

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
from measuring import environment, markdown_table, plan_record, timed, write_json  # noqa: E402

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
TIMES: list[dict[str, Any]] = []
"""One record per `predict` of unbabel-comet's models (comet-score's and the old path's)."""


def timed_predicts() -> None:
    """Record the seconds and peak GPU memory of every unbabel-comet `predict`."""
    import torch
    from comet.models.base import CometModel

    original = CometModel.predict

    def predict(self: Any, samples: Any, *arguments: Any, **settings: Any) -> Any:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        took, result = timed(device, lambda: original(self, samples, *arguments, **settings))
        TIMES.append({"segments": len(samples), "seconds": took.seconds, "peak_gib": took.peak_gib})
        return result

    CometModel.predict = predict


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


def measure(name: str, device: str, segments: int, run: Callable[[], Any]) -> dict[str, Any]:
    took, scores = timed(device, run)
    return plan_record(name, took, segments, scores=scores)


def comet_score(folder: Path, rows: Any, reference: bool, work: Path, gpus: int) -> list[float]:
    """comet-score's command, in this process, with its defaults (float16, batches of 16)."""
    import json

    from comet.cli.score import score_command

    files = {}
    for name, column in (("src", "src_text"), ("mt", "mt_text"), ("ref", "ref_text")):
        files[name] = work / f"{name}.txt"
        files[name].write_text("\n".join(rows[column]) + "\n", encoding="utf-8")
    output = work / "comet-score.json"
    argv = sys.argv
    sys.argv = [
        "comet-score", "-s", str(files["src"]), "-t", str(files["mt"]),
        *(["-r", str(files["ref"])] if reference else []),
        "--model", str(folder / CHECKPOINT), "--to_json", str(output), "--quiet",
        "--gpus", str(gpus),
    ]  # fmt: skip
    # It prints every sentence's score, even with --quiet.
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            score_command()
    finally:
        sys.argv = argv
    (records,) = json.loads(output.read_text(encoding="utf-8")).values()
    return [float(record["COMET"]) for record in records]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(RELEASED), required=True)
    parser.add_argument("--segments", type=int, default=1920)
    parser.add_argument("--direction", type=int, default=480, help="segments per direction")
    parser.add_argument("--batch-sizes", default="16,32,64,128")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes, on the CPU")
    parser.add_argument(
        "--without-old-path", action="store_true", help="skip comet's predict per direction"
    )
    parser.add_argument("--output", type=Path)
    arguments = parser.parse_args()
    import torch

    device = "cpu" if arguments.tiny else "cuda"
    released = RELEASED[arguments.shape]
    metric_class = released.metric
    timed_predicts()
    rows = unique_rows(arguments.segments)
    print(environment(device), flush=True)
    record: dict[str, Any] = {"environment": environment(device), "shape": arguments.shape}
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
        results = []
        sizes = [int(size) for size in arguments.batch_sizes.split(",")]
        metric = metric_class(model=str(folder), device=device)
        load_start = time.perf_counter()
        metric.load()
        record["load_seconds"] = time.perf_counter() - load_start
        weights = torch.cuda.memory_allocated() / 2**30 if device == "cuda" else 0.0
        print(f"ours: loaded in {record['load_seconds']:.1f} s, {weights:.2f} GiB", flush=True)
        record["weights_gib"] = weights
        per_direction = directions(rows, arguments.direction)
        for size in [sizes[0], *sizes]:  # the first pass warms up
            metric.batch_size = size
            results.append(
                measure(
                    f"ours, batch {size}, {metric.resolved_precision()}",
                    device,
                    len(rows),
                    lambda: [s for part in per_direction for s in metric.score(part)[metric.name]],
                )
            )
        results[0]["plan"] += " (first, cold)"
        # The old path: the model's own predict per direction, on the model we hold.
        metric.batch_size = sizes[0]

        def lightning_predict() -> list[float]:
            model = metric.load()
            scores: list[float] = []
            for part in per_direction:
                with torch.autocast(
                    device, dtype=torch.bfloat16, enabled=metric.resolved_precision() == "bfloat16"
                ):
                    prediction = model.predict(
                        metric.samples(part),
                        batch_size=sizes[0],
                        gpus=1 if device == "cuda" else 0,
                        progress_bar=False,
                    )
                scores.extend(prediction.scores)
            return scores

        if not arguments.without_old_path:
            results.append(
                measure(
                    f"comet's predict per direction, batch {sizes[0]}",
                    device,
                    len(rows),
                    lightning_predict,
                )
            )
        metric._model = None
        gc.collect()
        torch.cuda.empty_cache()
        TIMES.clear()
        results.append(
            measure(
                "comet-score, batch 16, float16 (whole command)",
                device,
                len(rows),
                lambda: comet_score(
                    folder, rows, metric_class.uses_reference, work, int(device == "cuda")
                ),
            )
        )
        (predict,) = TIMES
        results.append(
            {
                "plan": "comet-score, batch 16, float16 (its predict)",
                "segments": predict["segments"],
                "seconds": predict["seconds"],
                "segments_per_s": predict["segments"] / predict["seconds"],
                "peak_gib": predict["peak_gib"],
                "scores": results[-1]["scores"],
            }
        )
        reference = results[-1]["scores"]
        rows_out = []
        for result in results:
            difference = max(abs(a - b) for a, b in zip(result["scores"], reference, strict=True))
            rows_out.append(
                [
                    result["plan"],
                    f"{result['seconds']:.2f}",
                    f"{result['segments_per_s']:.1f}",
                    "-" if result["peak_gib"] is None else f"{result['peak_gib']:.2f}",
                    f"{difference:.3g}",
                ]
            )
        print(
            markdown_table(
                ("plan", "seconds", "segments/s", "peak GiB", "max |score - comet-score|"),
                rows_out,
            )
        )
        record["plans"] = results
        write_json(arguments.output, record, leave_out="scores")


if __name__ == "__main__":
    main()
