"""The score stage's CPU time with one shard against eight: what Snakemake does after each job
must grow with the job's outputs, not with their square.

    .venv/bin/python benchmarks/score_shards.py [--directions 384] [--sentences 300]
        [--repeats 2] [--snakemake-checksums]

Builds a dataset of `--directions` x `--sentences` (sentences of 10-40 words) and, for
`shards: 1` and `shards: 8` in turns, `--repeats` times: translates with copy-source in a fresh
working directory (not timed), then times `snakemake scores` (chrF++, one CPU per job,
`--cores 2`): the CPU time of Snakemake and of every job it starts. Prints each one's least CPU
time and their ratio (target: shards 1 at most 1.3x shards 8). `--snakemake-checksums` adds the
same runs with Snakemake's input checksums back on (`--max-checksum-file-size 1000000`,
Snakemake's default), to show what they cost.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from workflow_runs import REPOSITORY, Usage, run_snakemake, write_config, write_dataset

sys.path.insert(0, str(REPOSITORY))
from tests.synthetic import synthetic_directions

TARGET = 1.3
SNAKEMAKE_CHECKSUMS = ("--max-checksum-file-size", "1000000")


def score_stage(root: Path, dataset: Path, shards: int, extra: tuple[str, ...]) -> Usage:
    workdir = root / f"shards{shards}"
    shutil.rmtree(workdir, ignore_errors=True)
    write_config(workdir, dataset, shards=shards)
    run_snakemake(workdir, "translations", *extra)
    return run_snakemake(workdir, "scores", *extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--directions", type=int, default=384)
    parser.add_argument("--sentences", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--snakemake-checksums", action="store_true")
    arguments = parser.parse_args()
    variants: dict[str, tuple[str, ...]] = {"workflow's settings": ()}
    if arguments.snakemake_checksums:
        variants["Snakemake's input checksums"] = SNAKEMAKE_CHECKSUMS
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        dataset = root / "dataset"
        write_dataset(dataset, synthetic_directions(arguments.directions), arguments.sentences)
        print(f"{arguments.directions} directions x {arguments.sentences} sentences, chrF++, "
              f"--cores 2; least of {arguments.repeats} runs each")  # fmt: skip
        print(f"{'score stage':30} {'shards':>6} {'CPU s':>7} {'wall s':>7}")
        for label, extra in variants.items():
            usages: dict[int, list[Usage]] = {1: [], 8: []}
            for _ in range(arguments.repeats):
                for shards, runs in usages.items():
                    runs.append(score_stage(root, dataset, shards, extra))
            least = {
                shards: min(runs, key=lambda usage: usage.cpu_seconds)
                for shards, runs in usages.items()
            }
            for shards, usage in least.items():
                print(f"{label:30} {shards:6} {usage.cpu_seconds:7.1f} {usage.wall_seconds:7.1f}")
            ratio = least[1].cpu_seconds / least[8].cpu_seconds
            verdict = "met" if ratio <= TARGET else "NOT met"
            print(f"{label}: shards 1 / shards 8 = {ratio:.2f} in CPU time "
                  f"(target <= {TARGET}: {verdict})")  # fmt: skip


if __name__ == "__main__":
    main()
