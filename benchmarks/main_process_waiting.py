"""Snakemake's main process while jobs wait for a core, with the workflow's patch
(`bouquet_eval.planning.snakemake_patch`) and without, side by side.

    .venv/bin/python benchmarks/main_process_waiting.py [--jobs 4] [--inputs 500]
        [--seconds 15,45]

A Snakefile of `--jobs` jobs, each reading `--inputs` files of its own and sleeping, on one core:
all but one wait at any time, as a model's score jobs waited behind each other with `shards: 4`
on two cores. For each of `--seconds` (how long a job sleeps), both runs at once, one with the
patch applied by the Snakefile's `onstart` (as the workflow's own hook applies it) and one
without; the CPU time of each Snakemake process (its jobs are `sleep`: they cost nothing).
Prints each side's CPU seconds and what each gained from the shorter sleep to the longer: the
patched process's cost should not grow with the time the jobs wait, the plain one's does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent

SNAKEFILE = """
from bouquet_eval.planning.snakemake_patch import apply_to_run

onstart:
    if config.get("patch"):
        print("left as they are:", apply_to_run(workflow))

rule all:
    input: expand("out/{{j}}.txt", j=range({jobs}))

rule wait:
    input: expand("in/{{{{j}}}}/{{i}}.txt", i=range({inputs}))
    output: "out/{{j}}.txt"
    shell: "sleep {seconds}; touch {{output}}"
"""


def prepare(folder: Path, jobs: int, inputs: int, seconds: int) -> None:
    folder.mkdir(parents=True)
    (folder / "Snakefile").write_text(SNAKEFILE.format(jobs=jobs, inputs=inputs, seconds=seconds))
    for job in range(jobs):
        (folder / "in" / str(job)).mkdir(parents=True)
        for number in range(inputs):
            (folder / "in" / str(job) / f"{number}.txt").touch()


def start(folder: Path, patched: bool) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "snakemake", "--cores", "1", "--workflow-profile", "none"]
    command += ["--quiet", "--config", f"patch={int(patched)}"]
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY / "scripts")}
    with open(folder / "snakemake.log", "wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(command, cwd=folder, env=environment, stdout=log, stderr=log)


def cpu_seconds(process: subprocess.Popen[bytes], folder: Path) -> float:
    """The CPU time of a finished child and its own children (`os.wait4`'s usage)."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        log = (folder / "snakemake.log").read_text(errors="replace")
        raise RuntimeError(f"snakemake failed ({process.returncode}):\n{log[-3000:]}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--inputs", type=int, default=500)
    parser.add_argument("--seconds", default="15,45")
    arguments = parser.parse_args()
    sleeps = [int(seconds) for seconds in arguments.seconds.split(",")]
    measured: dict[int, dict[bool, float]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for seconds in sleeps:
            folders = {
                patched: Path(scratch) / f"{seconds}-{'patched' if patched else 'plain'}"
                for patched in (True, False)
            }
            for folder in folders.values():
                prepare(folder, arguments.jobs, arguments.inputs, seconds)
            sides = {patched: start(folder, patched) for patched, folder in folders.items()}
            used = {patched: cpu_seconds(sides[patched], folders[patched]) for patched in sides}
            measured[seconds] = used
            print(f"jobs of {seconds} s ({arguments.jobs} on one core, {arguments.inputs} inputs "
                  f"each): patched {used[True]:.2f} CPU-s, plain {used[False]:.2f} CPU-s; load "
                  f"average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    if len(sleeps) > 1:
        short, long = measured[sleeps[0]], measured[sleeps[-1]]
        waited = (sleeps[-1] - sleeps[0]) * (arguments.jobs - 1)
        for patched, name in ((True, "patched"), (False, "plain")):
            print(f"{name}: {long[patched] - short[patched]:+.2f} CPU-s for {waited} s more "
                  "during which jobs waited for the core")  # fmt: skip


if __name__ == "__main__":
    main()
