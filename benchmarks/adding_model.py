"""Adding a model to a finished run, as Snakemake runs it: the results stage's jobs that one more
model brings (its aggregate and heatmaps jobs, and the leaderboard job of every model) against
those of building every model's results from their scores.

    .venv/bin/python benchmarks/adding_model.py [--workdir DIR] [--directions 1062]
        [--sentences 854] [--models 5] [--runs 3]

Builds once, kept in `--workdir` (a temporary folder without it): a dataset of `--directions` x
`--sentences` (sentences of 10-40 words), and `--models` + 1 models whose translations were
made elsewhere (`translator: provided`, each reference with its own share of its words dropped,
so that the leaderboard ranks them apart), scored with chrF++ by the workflow (at 1062 x 854 x
6, about 23 minutes on 2 cores). Then, `--runs` times in turn, each a `snakemake --cores 2` as
users start it, its jobs' CPU time apart from that of Snakemake's main process (which reads the
workflow, plans and schedules, whatever the jobs):
- building the first `--models` models' results, with only them configured: `--forcerun
  aggregate` (their aggregate and heatmaps jobs, and the leaderboard job);
- adding the last model: every model configured, its aggregate job forced, as when its scores
  have just been made (its aggregate and heatmaps jobs, and the leaderboard job);
- building every model's results: `--forcerun aggregate`, every model configured.
Prints each command's CPU time and adding against building the models there were and all of
them, jobs alone (target: at most 0.2); `results_stage.py` measures the same stage's work in
one process, without the jobs' start and their reading and writing of files.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from workflow_runs import REPOSITORY, Usage, run_snakemake, write_config, write_dataset

sys.path.insert(0, str(REPOSITORY))
from tests.synthetic import synthetic_directions

TARGET = 0.2
COMPLETE = ".complete"
"""Written into a folder the benchmark builds once it is whole: a run stopped midway builds it
again."""


def names(count: int) -> list[str]:
    return [f"model-{number + 1}" for number in range(count)]


def write_translations(dataset: Path, folder: Path, dropped: float, seed: int) -> None:
    """One `<src>-<tgt>.jsonl` per direction of `dataset`: each reference, a `dropped` share of
    its words left out, as a model's output."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted(dataset.glob("*.parquet")):
        rows = pq.read_table(path, columns=["src_lang", "tgt_lang", "src_text", "tgt_text"])
        with (folder / f"{path.stem}.jsonl").open("w", encoding="utf-8") as handle:
            for row in rows.to_pylist():
                words = row.pop("tgt_text").split()
                kept = [word for word in words if rng.random() >= dropped] or words[:1]
                handle.write(json.dumps({**row, "mt_text": " ".join(kept)}) + "\n")
    (folder / COMPLETE).touch()


def configure(workdir: Path, models: list[str]) -> None:
    provided = workdir / "provided"
    entries = [{"name": m, "translator": "provided", "path": str(provided / m)} for m in models]
    write_config(workdir, workdir / "dataset", models=entries)


def ranked(workdir: Path) -> int:
    """How many models the leaderboard the last command wrote holds."""
    return len(pd.read_csv(workdir / "runs" / "leaderboard.csv"))


def jobs(usage: Usage) -> float:
    return usage.cpu_seconds - usage.main_cpu_seconds


def described(usage: Usage) -> str:
    return (
        f"jobs {jobs(usage):.2f} CPU-s, main process {usage.main_cpu_seconds:.1f} CPU-s, "
        f"{usage.wall_seconds:.0f} s wall"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--sentences", type=int, default=854)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        measure(arguments.workdir or Path(scratch), arguments)


def measure(workdir: Path, arguments: argparse.Namespace) -> None:
    count = arguments.models
    models = names(count + 1)
    dataset = workdir / "dataset"
    print(f"{arguments.directions} directions x {arguments.sentences} sentences, {count} models "
          f"(+1), chrF++, in {workdir}", flush=True)  # fmt: skip
    if not (dataset / COMPLETE).exists():
        directions = sorted(synthetic_directions(arguments.directions))
        write_dataset(dataset, directions, arguments.sentences)
        (dataset / COMPLETE).touch()
    for number, model in enumerate(models):
        folder = workdir / "provided" / model
        if not (folder / COMPLETE).exists():
            write_translations(dataset, folder, dropped=0.05 * (number + 1), seed=number)
    configure(workdir, models)
    print(f"every model scored (what is not yet): {described(run_snakemake(workdir))}")
    added = models[-1]
    adding, building, building_all = [], [], []
    for run in range(1, arguments.runs + 1):
        configure(workdir, models[:-1])
        building.append(run_snakemake(workdir, "--forcerun", "aggregate"))
        assert ranked(workdir) == count
        configure(workdir, models)
        adding.append(run_snakemake(workdir, "--forcerun", f"runs/{added}/scores.csv"))
        assert ranked(workdir) == count + 1
        building_all.append(run_snakemake(workdir, "--forcerun", "aggregate"))
        print(f"run {run}: building {count} models: {described(building[-1])}")
        print(f"run {run}: adding {added}: {described(adding[-1])}")
        print(f"run {run}: building {count + 1} models: {described(building_all[-1])}", flush=True)
    print()
    for label, whole in ((f"{count} models", building), (f"{count + 1} models", building_all)):
        ratios = [jobs(a) / jobs(b) for a, b in zip(adding, whole, strict=True)]
        verdict = "met" if max(ratios) <= TARGET else "NOT met"
        print(f"adding {added}, jobs: {min(ratios):.3f}-{max(ratios):.3f} of building {label} "
              f"(target <= {TARGET}: {verdict})")  # fmt: skip
    mains = [u.main_cpu_seconds for u in [*building, *adding, *building_all]]
    print(f"Snakemake's main process, each command: {min(mains):.1f}-{max(mains):.1f} CPU-s")


if __name__ == "__main__":
    main()
