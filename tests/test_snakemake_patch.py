"""Snakemake's main process as the workflow patches it for a run
(bouquet_eval.planning.snakemake_patch): scheduler rounds that follow the jobs, not the
seconds; each waiting job's inputs sized once; the same records as Snakemake's own."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import snakemake
from snakemake.persistence import PersistenceBase
from snakemake.scheduling.job_scheduler import JobScheduler

from bouquet_eval.planning.snakemake_patch import (
    PATCHED_SOURCES,
    WRITTEN_FOR,
    _LeanRounds,
    apply_to_run,
    changed_sources,
    unpatched_message,
)

from .conftest import REPOSITORY, patience

JOBS = 3
SNAKEFILE = f"""
from bouquet_eval.planning.snakemake_patch import apply_to_run

onstart:
    if config.get("patch"):
        print("left as they are:", apply_to_run(workflow))

rule all:
    input: expand("out/{{i}}.txt", i=range({JOBS}))

rule make:
    input: "in/{{i}}.txt", "in/shared.txt"
    output: "out/{{i}}.txt", "out/{{i}}.copy"
    shell: "cp {{input[0]}} {{output[0]}}; cp {{input[0]}} {{output[1]}}"
"""


def test_the_patch_is_written_for_the_pinned_snakemake() -> None:
    """Upgrading Snakemake fails here first: the patch is then reviewed against the new code."""
    pins = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"snakemake=={WRITTEN_FOR}" in pins
    assert snakemake.__version__ == WRITTEN_FOR
    classes = {"JobScheduler": JobScheduler, "PersistenceBase": PersistenceBase}
    assert changed_sources(classes) == []


def run(folder: Path, *config: str) -> str:
    """The tiny workflow above on one core, its jobs waiting for it in turn; Snakemake's log.
    A run whose rounds were not released would hang: it fails after a bound."""
    (folder / "in").mkdir(parents=True)
    for name in [*map(str, range(JOBS)), "shared"]:
        (folder / "in" / f"{name}.txt").write_text(name)
    (folder / "Snakefile").write_text(SNAKEFILE)
    command = [sys.executable, "-m", "snakemake", "--cores", "1", "--verbose"]
    command += ["--workflow-profile", "none", "--config", *config]
    finished = subprocess.run(
        command, cwd=folder, capture_output=True, text=True, check=True, timeout=patience(120)
    )
    return finished.stdout + finished.stderr


def records(folder: Path) -> dict[str, dict[str, Any]]:
    """Snakemake's record of each output, without what differs from run to run."""
    found = {}
    for path in (folder / ".snakemake" / "metadata").iterdir():
        record = json.loads(path.read_text())
        for key in ("starttime", "endtime", "job_hash"):
            record.pop(key)
        found[base64.b64decode(path.name.replace("@", "/")).decode()] = record
    return found


def test_a_patched_run_finishes_with_snakemake_s_own_records(tmp_path: Path) -> None:
    """Jobs waiting for one core, no timed rounds: each finished job releases the round that
    starts the next (the rounds themselves are counted by the tests below), and every record
    written is the one Snakemake writes unpatched."""
    patched = run(tmp_path / "patched", "patch=1")
    assert "left as they are: []" in patched
    # A round to start, one as each job finishes (the `all` job is one).
    assert patched.count("Ready jobs:") <= JOBS + 2, patched
    run(tmp_path / "plain")
    assert records(tmp_path / "patched") == records(tmp_path / "plain")
    assert len(records(tmp_path / "plain")) == 2 * JOBS


class Path_:
    """An input path of a job, as the scheduler sees it: counts how often it is read."""

    def __init__(self, name: str, reads: dict[str, int]) -> None:
        self.name, self.reads = name, reads

    async def exists(self) -> bool:
        self.reads[self.name] = self.reads.get(self.name, 0) + 1
        return True

    async def size(self) -> int:
        return len(self.name)


def test_each_input_of_a_waiting_job_is_sized_once() -> None:
    reads: dict[str, int] = {}
    shared = Path_("shared", reads)
    jobs = [SimpleNamespace(input=[Path_(f"in{i}", reads), shared]) for i in range(3)]
    scheduler = SimpleNamespace(
        _input_sizes={},
        job_selector=lambda jobs: [],
        _schedule_reevalutation=lambda delay: None,
        job_rate_limiter=None,
    )
    rounds = _LeanRounds(scheduler)
    for _ in range(5):  # rounds in which the same jobs wait
        asyncio.run(rounds.update_input_sizes(jobs[:2]))
    asyncio.run(rounds.update_input_sizes(jobs))  # a third job becomes ready
    assert reads == {"in0": 1, "in1": 1, "in2": 1, "shared": 1}
    # Every input of every ready job has its size, as the greedy scheduler reads them.
    assert all(scheduler._input_sizes[path] == len(path.name) for j in jobs for path in j.input)


def test_a_timed_round_only_when_the_rate_limit_was_reached() -> None:
    armed: list[int] = []
    free = [5]
    scheduler = SimpleNamespace(
        _input_sizes={},
        job_selector=lambda jobs: list(jobs)[:1],
        _schedule_reevalutation=armed.append,
        job_rate_limiter=SimpleNamespace(get_free_jobs=lambda: free[0]),
        workflow=SimpleNamespace(dag=SimpleNamespace(queue_input_jobs=[])),
    )
    rounds = _LeanRounds(scheduler)
    rounds.install()
    assert scheduler.job_selector(["a", "b"]) == ["a"]
    scheduler._schedule_reevalutation(1)
    assert armed == []
    free[0] = 0  # the limit held the other job back: a round after the timespan starts it
    scheduler.job_selector(["b"])
    scheduler._schedule_reevalutation(1)
    assert armed == [1]


def test_a_snakemake_whose_code_differs_runs_unpatched_and_says_why(monkeypatch: Any) -> None:
    """Another Snakemake (here: one method's source not the one recorded): the scheduler is
    left whole as it is, the records (whose source is the same) are still patched, and the
    run's message names the version, the method and what to install."""
    monkeypatch.setitem(PATCHED_SOURCES, "JobScheduler.update_input_sizes", "0" * 16)

    def own(*arguments: Any) -> None: ...

    scheduler = SimpleNamespace(
        update_input_sizes=own, job_selector=own, _schedule_reevalutation=own
    )
    persistence = SimpleNamespace(finished=own)
    workflow = SimpleNamespace(scheduler=scheduler, persistence=persistence)
    unpatched = apply_to_run(workflow)
    assert unpatched == ["JobScheduler.update_input_sizes"]
    assert scheduler.update_input_sizes is own
    assert scheduler.job_selector is own
    assert scheduler._schedule_reevalutation is own
    assert persistence.finished is not own
    message = unpatched_message(unpatched)
    assert f"snakemake {snakemake.__version__}'s JobScheduler.update_input_sizes" in message
    assert f"snakemake=={WRITTEN_FOR}" in message
