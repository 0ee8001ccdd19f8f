"""What the benchmarks that run the whole workflow share: a BOUQuET-shaped dataset with
sentences of realistic length, and the CPU time of a `snakemake` command with all its jobs."""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from bouquet_eval.data.dataset import Direction

REPOSITORY = Path(__file__).resolve().parent.parent
SNAKEFILE = REPOSITORY / "workflow" / "Snakefile"
VOCABULARY = 5_000
ONE_CPU = {"translate": {"cpus": 1}, "score": {"cpus": 1}, "aggregate": {"cpus": 1}}
"""One CPU per job, so that `--cores 2` runs two jobs at a time whatever the defaults."""


def write_dataset(folder: Path, directions: list[Direction], sentences: int, seed: int = 0) -> None:
    """One parquet file per direction; source and reference are 10-40 made-up words each, as
    long as BOUQuET's sentences (chrF++ costs grow with their length)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(VOCABULARY)]

    def sentence() -> str:
        return " ".join(rng.choices(words, k=rng.randint(10, 40))) + "."

    folder.mkdir(parents=True, exist_ok=True)
    for direction in directions:
        table = pa.table(
            {
                "src_lang": [direction.src_lang] * sentences,
                "tgt_lang": [direction.tgt_lang] * sentences,
                "src_text": [sentence() for _ in range(sentences)],
                "tgt_text": [sentence() for _ in range(sentences)],
                "uniq_id": [f"s{i}" for i in range(sentences)],
            }
        )
        pq.write_table(table, folder / f"{direction}.parquet")


def write_config(workdir: Path, dataset: Path, **settings: Any) -> Path:
    """A copy-source + chrF++ configuration in `workdir`, with `settings` over it."""
    config = {
        "dataset": {"path": str(dataset)},
        "output_dir": "runs",
        "metrics": ["chrf"],
        "resources": ONE_CPU,
        "models": [{"name": "copy-source", "translator": "copy-source"}],
        **settings,
    }
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Usage:
    wall_seconds: float
    cpu_seconds: float
    """User and system time of Snakemake and every job it started."""
    main_cpu_seconds: float
    """User and system time of Snakemake's main process alone (its threads included)."""


# `python -m snakemake`, writing the main process's own CPU time to the file named first when
# it exits (jobs are its children: RUSAGE_CHILDREN of the caller counts them with it).
_MEASURED_SNAKEMAKE = """
import atexit, resource, runpy, sys
target = sys.argv.pop(1)
def record():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(target, "w") as handle:
        handle.write(str(usage.ru_utime + usage.ru_stime))
atexit.register(record)
sys.argv[0] = "snakemake"
runpy.run_module("snakemake", run_name="__main__")
"""


def run_snakemake(workdir: Path, *arguments: str, cores: int = 2) -> Usage:
    """`snakemake` on the workflow in `workdir` with `--cores` (2), as users start it."""
    main_cpu = workdir / ".main-process-cpu"
    command = [sys.executable, "-c", _MEASURED_SNAKEMAKE, str(main_cpu)]
    command += ["--snakefile", str(SNAKEFILE)]
    # Targets first: --configfile takes every argument that follows it, --quiet an optional one.
    command += ["--directory", str(workdir), "--cores", str(cores), *arguments, "--quiet", "all"]
    command += ["--configfile", str(workdir / "config.yaml")]
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY / "scripts")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    finished = subprocess.run(command, env=environment, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if finished.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{finished.stdout}\n{finished.stderr}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return Usage(wall, cpu, float(main_cpu.read_text()))
