"""Snakemake's start-up with the workflow's console plugin as it is against as it was.

Snakemake imports every installed logger plugin when it starts, in the main process and in
every process that runs a job on a cluster (`snakemake --version` included). The plugin
`bouquet` used to import the console (`bouquet_eval.command.console`) and with it about 40
modules of the package; it now imports none of them at start-up and loads the console once the
workflow has imported the package. The earlier plugin is taken from git history (a832ea8) into
a folder put first on PYTHONPATH; both runs see this checkout's package.

Prints, for `python -m snakemake --version`, the wall time of each (least and median of
`--rounds`, alternating, each in a fresh process), their ratio, and how many modules of the
package each imported.

    .venv/bin/python benchmarks/plugin_startup.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
EARLIER = "a832ea8"
PLUGIN = "snakemake_logger_plugin_bouquet"
COUNT = (
    "import runpy, sys\n"
    "sys.argv = ['snakemake', '--version']\n"
    "try:\n"
    "    runpy.run_module('snakemake', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    "print(sum(name.startswith('bouquet_eval') for name in sys.modules), file=sys.stderr)\n"
)


def environment(first: list[str]) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*first, str(REPOSITORY / "scripts")])}


def started(env: dict[str, str]) -> float:
    begin = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "snakemake", "--version"], env=env, check=True, capture_output=True
    )
    return time.perf_counter() - begin


def modules(env: dict[str, str]) -> int:
    result = subprocess.run(
        [sys.executable, "-c", COUNT], env=env, check=True, capture_output=True, text=True
    )
    return int(result.stderr.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        earlier = Path(folder) / PLUGIN
        earlier.mkdir()
        (earlier / "__init__.py").write_bytes(
            subprocess.run(
                ["git", "show", f"{EARLIER}:scripts/{PLUGIN}/__init__.py"],
                cwd=REPOSITORY,
                check=True,
                capture_output=True,
            ).stdout
        )
        runs = {"as it was": environment([folder]), "as it is": environment([])}
        times: dict[str, list[float]] = {name: [] for name in runs}
        for env in runs.values():
            started(env)  # warm the file cache
        for _ in range(args.rounds):
            for name, env in runs.items():
                times[name].append(started(env))
        for name, env in runs.items():
            print(
                f"{name}: least {min(times[name]):.2f} s, median "
                f"{statistics.median(times[name]):.2f} s, {modules(env)} modules of bouquet_eval"
            )
    before, after = (statistics.median(times[name]) for name in runs)
    print(f"start-up as it is / as it was: {after / before:.2f} (medians)")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
