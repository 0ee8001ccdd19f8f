"""Simulated GPU time of sharded jobs against one job per direction, at the benchmark's scale.

Runs the real workflow on a synthetic dataset of 1062 directions with a translator and a
metric that record every model load, with `shards` jobs per model. One job per direction
(`shards: per-direction`) is run for real on a sample of the directions (100 by default: 2200
jobs take over an hour on 2 cores), where it loads once per direction; that count is scaled
to all directions. Loads are priced with a simulated model load and simulated work per
direction (defaults: 60 s to load a translation model, 45 s to load MetricX, 20 s of
translation and 5 s of scoring per 854-sentence direction):

    total = loads x load time + directions x work time

Prints both totals and their ratio (the headline number of docs/architecture.md).

    .venv/bin/python benchmarks/model_loads.py [--directions 1062] [--shards 8] [--sample 100]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))
from tests.synthetic import synthetic_directions, write_dataset  # noqa: E402


def run(workdir: Path, dataset: Path, shards: int | str) -> tuple[int, int, float]:
    """(translation loads, metric loads, wall seconds) of one complete run."""
    workdir.mkdir()
    translations, metrics = workdir / "translator.txt", workdir / "metric.txt"
    config = {
        "dataset": {"path": str(dataset)},
        "shards": shards,
        "metrics": ["recording:LoadCountingMetric"],
        "resources": {
            "translate": {"mem_mb": 500, "runtime": 5, "cpus": 1},
            "score": {"mem_mb": 500, "runtime": 5, "cpus": 1},
        },
        "models": [
            {
                "name": "m",
                "translator": "recording:RecordingTranslator",
                "translator_kwargs": {"record": str(translations)},
                "prompt_fn": "recording:tagged_prompt",
            }
        ],
    }
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPOSITORY / "tests" / "plugins"),
        "RECORDING_METRIC_FILE": str(metrics),
    }
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPOSITORY / "workflow" / "Snakefile"),
         "--cores", "2", "--scheduler", "greedy", "--quiet", "all",
         "--configfile", "config.yaml"],
        cwd=workdir, env=environment, check=True, capture_output=True,
    )  # fmt: skip
    wall = time.perf_counter() - started

    def loads(path: Path) -> int:
        return sum(line.startswith("LOAD") for line in path.read_text().splitlines())

    return loads(translations), loads(metrics), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--sample", type=int, default=100)
    parser.add_argument("--translator-load", type=float, default=60.0)
    parser.add_argument("--metric-load", type=float, default=45.0)
    parser.add_argument("--translate-work", type=float, default=20.0)
    parser.add_argument("--score-work", type=float, default=5.0)
    arguments = parser.parse_args()
    directions = synthetic_directions(arguments.directions)
    work = len(directions) * (arguments.translate_work + arguments.score_work)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        write_dataset(root / "dataset", directions)
        sharded = run(root / "sharded", root / "dataset", arguments.shards)
        sample = directions[: arguments.sample]
        write_dataset(root / "sample", sample)
        measured = run(root / "per-direction", root / "sample", "per-direction")
    scale = len(directions) / len(sample)
    results = {
        f"{arguments.shards} shards": sharded,
        "one job per direction": (
            round(measured[0] * scale),
            round(measured[1] * scale),
            measured[2],
        ),
    }
    print(
        f"one job per direction, measured on {len(sample)} directions: "
        f"{measured[0]} translator and {measured[1]} metric loads; scaled by {scale:.2f}"
    )
    print(f"{len(directions)} directions; simulated load {arguments.translator_load:.0f} s "
          f"(translator), {arguments.metric_load:.0f} s (metric); simulated work "
          f"{arguments.translate_work + arguments.score_work:.0f} s per direction")  # fmt: skip
    totals = {}
    for label, (translator_loads, metric_loads, wall) in results.items():
        loading = (
            translator_loads * arguments.translator_load + metric_loads * arguments.metric_load
        )
        totals[label] = loading + work
        print(
            f"{label:24} translator loads {translator_loads:5d}  metric loads {metric_loads:5d}  "
            f"simulated GPU hours {totals[label] / 3600:7.1f}  (this run: {wall:.0f} s wall)"
        )
    sharded, per_direction = totals.values()
    print(f"one job per direction needs {per_direction / sharded:.1f}x the GPU time of sharding")


if __name__ == "__main__":
    main()
