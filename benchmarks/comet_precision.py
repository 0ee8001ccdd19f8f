"""How precision moves COMET-family scores: our float32, bfloat16 and float16 scores, and
unbabel-comet's own `comet-score` (always float16: it runs `model.half()`), on the same
sentences, side by side in one run.

    .venv-comet/bin/python benchmarks/comet_precision.py [--sentences 480] [--device cpu]

Scores the bundled sample's sentence pairs (each with a translation of its own, as
tests/test_comet.py builds them) with tiny random checkpoints of the three shapes
(tests/comet_checkpoints.py), unless `--model SHAPE=PATH` gives a real checkpoint folder for a
shape (then its encoder's tokenizer and config must be in the Hugging Face cache). Prints, per
shape and precision against float32: the largest and the mean absolute score difference over
the sentences whose xCOMET error spans agree, and how many sentences' spans differ.

Tiny random models say how the code behaves at each precision, not how much a real model's
scores move: measure that with `--model` on a real checkpoint (and on a GPU, `--device cuda`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))
from bouquet_eval.metrics import load_metric  # noqa: E402
from tests.comet_checkpoints import build_all  # noqa: E402
from tests.comet_reference import Scored, comet_score, sample_pairs  # noqa: E402
from tests.test_comet import SHAPES  # noqa: E402

PRECISIONS = ("float32", "bfloat16", "float16")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=480)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", action="append", default=[], metavar="SHAPE=PATH")
    arguments = parser.parse_args()
    rows = sample_pairs().head(arguments.sentences)
    with tempfile.TemporaryDirectory() as folder:
        checkpoints = build_all(Path(folder) / "checkpoints")
        checkpoints.update(
            {shape: Path(path) for shape, path in (item.split("=", 1) for item in arguments.model)}
        )
        print(f"{len(rows)} sentences, device {arguments.device}")
        print(f"{'shape':<10} {'precision':<22} {'max |diff|':>11} {'mean |diff|':>12} spans")
        for shape, metric_class in SHAPES.items():
            scored: dict[str, Scored] = {}
            for precision in PRECISIONS:
                metric = load_metric(
                    f"bouquet_eval.metrics.comet:{metric_class.__name__}",
                    {
                        "model": str(checkpoints[shape]),
                        "precision": precision,
                        "device": arguments.device,
                    },
                )
                scored[precision] = Scored.of(shape, metric.score(rows))
            records = comet_score(
                checkpoints[shape], rows, metric_class.uses_reference, Path(folder) / shape
            )
            scored["comet-score (float16)"] = Scored.of_records(shape, records)
            for name, other in scored.items():
                if name == "float32":
                    continue
                largest, mean, changed = other.compare(scored["float32"])
                print(f"{shape:<10} {name:<22} {largest:>11.2e} {mean:>12.2e} {changed}")


if __name__ == "__main__":
    main()
