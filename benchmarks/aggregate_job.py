"""The aggregate job's fixed cost: the job as Snakemake runs it, at many directions of few
sentences, against pyarrow and numpy computing the same.

    .venv/bin/python benchmarks/aggregate_job.py [--directions 1062] [--sentences 120]
        [--repeats 3]

Builds a dataset of `--directions` x `--sentences` (sentences of 10-40 words) and runs the
workflow to its aggregates (copy-source + chrF++, 8 shards, `--cores 2`; not timed). Then, in
turns, `--repeats` times:
- the job: `snakemake --forcerun aggregate`; its time is what Snakemake's `benchmark:` file of
  the job records (the job's process from its start: Python, imports, the model's scored files
  and provenance records, scores.csv, summary.csv, scored_rows.parquet, timing.csv and the
  manifest);
- the baseline: benchmarks/aggregate_scale.py's pyarrow + numpy program (the same means,
  bootstrap intervals and corpus scores, scored_rows.parquet) on the same scored files, in a
  fresh process, timed from within (its work alone) and from outside (Python and imports too).
Prints the least wall and CPU time of each and the ratio of the job to the baseline's work in
CPU time, which load elsewhere on the machine disturbs less (target: at most 3).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from workflow_runs import REPOSITORY, run_snakemake, write_config, write_dataset

sys.path.insert(0, str(REPOSITORY))
from tests.synthetic import synthetic_directions

TARGET = 3.0


@dataclass(frozen=True)
class Seconds:
    wall: float
    cpu: float


MODEL = "copy-source"
BASELINE = Path(__file__).resolve().parent / "aggregate_scale.py"
SINGLE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
"""As Snakemake runs a one-thread job."""


def job_seconds(workdir: Path) -> Seconds:
    run_snakemake(workdir, "aggregates", "--forcerun", "aggregate")
    benchmark = workdir / "logs" / MODEL / "aggregate.benchmark.tsv"
    with benchmark.open(encoding="utf-8") as handle:
        (row,) = csv.DictReader(handle, delimiter="\t")
    return Seconds(float(row["s"]), float(row["cpu_time"]))


def baseline_seconds(root: Path, directions: int, sentences: int) -> tuple[Seconds, Seconds]:
    """The baseline's work alone, and its process from start to end."""
    output = root / "baseline"
    output.mkdir(exist_ok=True)
    command = [sys.executable, str(BASELINE), "--child=baseline", f"--output={output}",
               f"--workdir={root}", f"--directions={directions}", f"--sentences={sentences}",
               "--metrics", "chrf"]  # fmt: skip
    environment = {**os.environ, **SINGLE_THREAD, "PYTHONPATH": str(REPOSITORY / "scripts")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    finished = subprocess.run(command, check=True, capture_output=True, text=True, env=environment)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    work = json.loads(finished.stdout.splitlines()[-1])
    return Seconds(work["seconds"], work["cpu_seconds"]), Seconds(wall, cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--directions", type=int, default=1062)
    parser.add_argument("--sentences", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        dataset, workdir = root / "dataset", root / "work"
        write_dataset(dataset, synthetic_directions(arguments.directions), arguments.sentences)
        write_config(workdir, dataset, shards=8)
        run_snakemake(workdir, "aggregates")
        # Where the baseline program looks for the scored files of its synthetic directions.
        (root / "model").symlink_to(workdir / "runs" / MODEL)
        jobs, works, wholes = [], [], []
        for _ in range(arguments.repeats):
            jobs.append(job_seconds(workdir))
            work, whole = baseline_seconds(root, arguments.directions, arguments.sentences)
            works.append(work)
            wholes.append(whole)
    print(f"{arguments.directions} directions x {arguments.sentences} sentences, chrF++; least "
          f"of {arguments.repeats} runs each")  # fmt: skip
    print(f"{'':44} {'wall s':>7} {'CPU s':>7}")
    rows = {"aggregate job (Snakemake's benchmark file)": jobs,
            "pyarrow + numpy, its work": works,
            "pyarrow + numpy, with Python and imports": wholes}  # fmt: skip
    least = {
        label: Seconds(min(s.wall for s in runs), min(s.cpu for s in runs))
        for label, runs in rows.items()
    }
    for label, seconds in least.items():
        print(f"{label:44} {seconds.wall:7.2f} {seconds.cpu:7.2f}")
    job, work, whole = least.values()
    ratio = job.cpu / work.cpu
    print(f"job / baseline's work = {ratio:.2f} in CPU time, {job.wall / work.wall:.2f} in wall "
          f"time (target <= {TARGET}: {'met' if ratio <= TARGET else 'NOT met'}); job / "
          f"baseline's process = {job.cpu / whole.cpu:.2f} in CPU time")  # fmt: skip


if __name__ == "__main__":
    main()
