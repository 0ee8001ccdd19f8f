"""How much the workflow adds to Snakemake's own planning time, at the benchmark's scale.

Builds a synthetic dataset of 1062 directions (two sentences each) and times, side by side:
- a dry run of the full plan, with one job per direction (`shards: per-direction`) and with
  8 shards per model;
- a no-op rerun after a completed run (8 shards);
each against two bare Snakefiles with the same jobs and output files: one whose rules only
`touch` their outputs in `shell:`, and one whose rules also carry the directives ours do
(`script:`, `log:`, `benchmark:`, `conda:`), which Snakemake itself spends time on. The three
commands of a row take turns, `--repeats` rounds, so that a spell of load elsewhere on the
machine slows all three alike; printed are each command's fastest time, the least disturbed
by such load, and the ratios (target: <= 1.3).

    .venv/bin/python benchmarks/dry_run_overhead.py [--directions 1062] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bouquet_eval.planning.sharding import assign_shards

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY))
from tests.synthetic import synthetic_directions, write_dataset  # noqa: E402

TOUCH_SCRIPT = """
from pathlib import Path

for path in snakemake.output:
    Path(path).touch()
"""

CONDA_ENVIRONMENT = "dependencies: [python=3.11]\n"

SHELL_RULE_BODY = """
            shell:
                "touch {output}"
"""

DIRECTIVES_RULE_BODY = """
            log:
                f"logs/{stage}/{shard}.log",
            benchmark:
                f"logs/{stage}/{shard}.benchmark.tsv"
            conda:
                "environment.yaml"
            script:
                "touch.py"
"""

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
    sources = [f"data/{d}.parquet" for d in members]
    translations = [f"out/{d}.jsonl" for d in members]
    scores = [f"out/{d}.scored.parquet" for d in members]
    stages = (("translate", sources, translations), ("score", translations, scores))
    for stage, inputs, outputs in stages:

        rule:
            name:
                f"{stage}_{shard}"
            input:
                inputs,
            output:
                [update(path) for path in outputs],
RULE_BODY

rule aggregate:
    input:
        expand("out/{d}.scored.parquet", d=ALL),
    output:
        "out/scores.csv",
    shell:
        "touch {output}"
"""


def write_bare_workflow(folder: Path, dataset: Path, shards: dict, body: str) -> None:
    folder.mkdir()
    (folder / "shards.json").write_text(
        json.dumps({name: [d.name for d in members] for name, members in shards.items()})
    )
    (folder / "Snakefile").write_text(BARE_SNAKEFILE.replace("RULE_BODY", body.strip("\n")))
    (folder / "touch.py").write_text(TOUCH_SCRIPT)
    (folder / "environment.yaml").write_text(CONDA_ENVIRONMENT)
    os.symlink(dataset, folder / "data")


def timed(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - started


def row(label: str, times: list[float]) -> tuple[str, float, float, float]:
    """A line of the table: the workflow's time, the bare Snakefile's, the bare one's with our
    directives."""
    ours, bare, directives = times
    return label, ours, bare, directives


def fastest_times(commands: dict[Path, list[str]], repeats: int) -> list[float]:
    """Each command's fastest of `repeats` runs, the commands taking turns."""
    rounds = [[timed(command, cwd) for cwd, command in commands.items()] for _ in range(repeats)]
    return [min(times) for times in zip(*rounds, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shards", type=int, default=8)
    arguments = parser.parse_args()
    directions = synthetic_directions(arguments.directions)
    snakemake = [sys.executable, "-m", "snakemake", "--cores", "2", "--quiet"]

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        dataset = root / "dataset"
        write_dataset(dataset, directions)
        results: list[tuple[str, float, float, float]] = []
        for shards in ("per-direction", arguments.shards):
            assigned = assign_shards(directions, shards)
            ours = root / f"ours-{shards}"
            ours.mkdir()
            config = {
                "dataset": {"path": str(dataset)},
                "shards": shards,
                "models": [{"name": "m", "translator": "reference"}],
            }
            (ours / "config.yaml").write_text(yaml.safe_dump(config))
            commands = {
                ours: [
                    *snakemake,
                    *("-s", str(REPOSITORY / "workflow" / "Snakefile")),
                    *("--configfile", "config.yaml"),
                ]
            }
            for kind, body in (("shell", SHELL_RULE_BODY), ("directives", DIRECTIVES_RULE_BODY)):
                bare = root / f"bare-{kind}-{shards}"
                write_bare_workflow(bare, dataset, assigned, body)
                commands[bare] = [*snakemake, "-s", "Snakefile"]
            jobs = 2 * len(assigned) + 2
            label = f"dry run, {jobs} jobs ({shards} shards)"
            dry_runs = {folder: [*command, "-n"] for folder, command in commands.items()}
            results.append(row(label, fastest_times(dry_runs, arguments.repeats)))
            if shards != "per-direction":
                for folder, command in commands.items():
                    subprocess.run(command, cwd=folder, check=True, capture_output=True)
                label = f"no-op rerun, {jobs} jobs ({shards} shards)"
                results.append(row(label, fastest_times(commands, arguments.repeats)))

    print(f"{len(directions)} directions, fastest of {arguments.repeats} runs each")
    print("bare: rules that only touch their outputs in shell:; bare+: the same with our")
    print("rules' directives (script:, log:, benchmark:, conda:)")
    header = f"{'measurement':42} {'workflow s':>10} {'bare s':>7} {'bare+ s':>8}"
    print(f"{header} {'ratio/bare':>10} {'ratio/bare+':>11}")
    for label, ours_seconds, bare_seconds, directives_seconds in results:
        print(
            f"{label:42} {ours_seconds:10.2f} {bare_seconds:7.2f} {directives_seconds:8.2f} "
            f"{ours_seconds / bare_seconds:10.2f} {ours_seconds / directives_seconds:11.2f}"
        )
    print("target: ratio <= 1.3")


if __name__ == "__main__":
    main()
