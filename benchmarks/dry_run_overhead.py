"""How much the workflow adds to Snakemake's own planning time, at the benchmark's scale.

Builds a synthetic dataset of 1062 directions (two sentences each) and times, side by side:
- a dry run of the full plan, with one job per direction (`shards: per-direction`) and with
  the default sharding;
- a no-op rerun after a completed run (default sharding);
each against a bare Snakefile with the same jobs and output files whose rules only `touch`
their outputs. Prints the medians and the ratios (target: <= 1.3).

    .venv/bin/python benchmarks/dry_run_overhead.py [--directions 1062] [--repeats 3]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from bouquet_eval.data import Direction
from bouquet_eval.sharding import assign_shards

REPOSITORY = Path(__file__).resolve().parent.parent

BARE_SNAKEFILE = """
import json
SHARDS = json.load(open("shards.json"))
ALL = [d for members in SHARDS.values() for d in members]


rule all:
    input:
        expand("out/{d}.jsonl", d=ALL),
        expand("out/{d}.scored.parquet", d=ALL),
        "out/scores.csv",


for shard, members in SHARDS.items():

    rule:
        name:
            f"translate_{shard}"
        input:
            [f"data/{d}.parquet" for d in members],
        output:
            [update(f"out/{d}.jsonl") for d in members],
        shell:
            "touch {output}"

    rule:
        name:
            f"score_{shard}"
        input:
            [f"out/{d}.jsonl" for d in members],
        output:
            [update(f"out/{d}.scored.parquet") for d in members],
        shell:
            "touch {output}"


rule aggregate:
    input:
        expand("out/{d}.scored.parquet", d=ALL),
    output:
        "out/scores.csv",
    shell:
        "touch {output}"
"""


def synthetic_directions(count: int) -> list[Direction]:
    codes = [f"{a}{b}x_Latn" for a, b in itertools.product("abcdefgh", repeat=2)]
    pairs = ((s, t) for s, t in itertools.permutations(codes, 2))
    return [Direction(s, t) for s, t in itertools.islice(pairs, count)]


def write_dataset(folder: Path, directions: list[Direction]) -> None:
    folder.mkdir(parents=True)
    for d in directions:
        table = pa.table(
            {
                "src_lang": [d.src_lang] * 2,
                "tgt_lang": [d.tgt_lang] * 2,
                "src_text": ["one sentence.", "another one."],
                "tgt_text": ["une phrase.", "une autre."],
                "uniq_id": ["s1", "s2"],
            }
        )
        pq.write_table(table, folder / f"{d}.parquet")


def timed(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def median_time(command: list[str], cwd: Path, repeats: int) -> float:
    return statistics.median(timed(command, cwd) for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shards", type=int, default=8)
    arguments = parser.parse_args()
    directions = synthetic_directions(arguments.directions)
    snakemake = [sys.executable, "-m", "snakemake", "--cores", "2", "--quiet"]

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        dataset = root / "dataset"
        write_dataset(dataset, directions)
        results = []
        for shards in ("per-direction", arguments.shards):
            ours = root / f"ours-{shards}"
            bare = root / f"bare-{shards}"
            ours.mkdir()
            bare.mkdir()
            config = {
                "dataset": {"path": str(dataset)},
                "shards": shards,
                "models": [{"name": "m", "translator": "reference"}],
            }
            (ours / "config.yaml").write_text(yaml.safe_dump(config))
            assigned = assign_shards(directions, shards)
            (bare / "shards.json").write_text(
                json.dumps({name: [d.name for d in members] for name, members in assigned.items()})
            )
            (bare / "Snakefile").write_text(BARE_SNAKEFILE)
            os.symlink(dataset, bare / "data")
            ours_command = [
                *snakemake,
                "-s",
                str(REPOSITORY / "workflow" / "Snakefile"),
                "--configfile",
                "config.yaml",
            ]
            bare_command = [*snakemake, "-s", "Snakefile"]
            jobs = 2 * len(assigned) + 2
            label = f"dry run, {jobs} jobs ({shards} shards)"
            results.append(
                (
                    label,
                    median_time([*ours_command, "-n"], ours, arguments.repeats),
                    median_time([*bare_command, "-n"], bare, arguments.repeats),
                )
            )
            if shards != "per-direction":
                subprocess.run(ours_command, cwd=ours, check=True, capture_output=True)
                subprocess.run(bare_command, cwd=bare, check=True, capture_output=True)
                results.append(
                    (
                        f"no-op rerun, {jobs} jobs ({shards} shards)",
                        median_time(ours_command, ours, arguments.repeats),
                        median_time(bare_command, bare, arguments.repeats),
                    )
                )

    print(f"{len(directions)} directions, median of {arguments.repeats} runs each")
    print(f"{'measurement':45} {'workflow s':>11} {'bare s':>8} {'ratio':>6}")
    for label, ours_seconds, bare_seconds in results:
        ratio = ours_seconds / bare_seconds
        print(f"{label:45} {ours_seconds:11.2f} {bare_seconds:8.2f} {ratio:6.2f}")
    print("target: ratio <= 1.3")


if __name__ == "__main__":
    main()
