"""Crashes lose nothing: the whole Snakemake process group is killed (SIGKILL) at several
points of a run, the same command is run again each time, and the outputs end byte-equal to
those of a run that was never interrupted, with no direction translated more than twice."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import SNAKEFILE, Workflow, patience
from .workflow_configs import SAMPLE_DIRECTIONS, bounds_config, recorded, recording_model

DIRECTIONS = [direction.name for direction in SAMPLE_DIRECTIONS[:8]]
# Outputs whose bytes must not depend on interruptions (the manifest and timing hold times).
COMPARED = ("*.jsonl", "*.scored.parquet", "scores.csv", "summary.csv", "scored_rows.parquet")


def crash_config(dataset: Path, record: Path) -> dict:
    model = recording_model("rec", record, direction_seconds=0.3)
    return bounds_config(dataset, shards=2, directions={"list": DIRECTIONS}, models=[model])


def outputs(workdir: Path) -> dict[str, bytes]:
    folder = workdir / "runs" / "rec"
    return {path.name: path.read_bytes() for pattern in COMPARED for path in folder.glob(pattern)}


def run_until(workflow: Workflow, condition: Callable[[], bool], limit: float = 180) -> bool:
    """Start the workflow as a user would, kill its process group once `condition` holds.

    Returns whether it was killed (False: the run ended first).
    """
    process = subprocess.Popen(
        workflow.command(),
        cwd=workflow.workdir.parent,
        env=workflow.environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + patience(limit)
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if condition():
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return True
            time.sleep(0.05)
        assert process.poll() is not None, "the run neither ended nor reached the kill point"
        return False
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_killed_runs_lose_nothing(workflow: Workflow, dataset: Path, tmp_path: Path) -> None:
    reference = Workflow(tmp_path / "uninterrupted")
    reference.workdir.mkdir()
    reference.write_config(crash_config(dataset, tmp_path / "reference-record.txt"))
    reference.run()
    expected = outputs(reference.workdir)
    assert len(expected) == 2 * len(DIRECTIONS) + 3

    record = workflow.workdir / "record.txt"
    workflow.write_config(crash_config(dataset, record))
    folder = workflow.workdir / "runs" / "rec"
    kill_points = [
        # In the middle of translating, twice.
        lambda: len([line for line in recorded(record) if line != "LOAD"]) >= 2,
        lambda: len([line for line in recorded(record) if line != "LOAD"]) >= 6,
        # While scoring, and while aggregating.
        lambda: any(folder.glob("*.scored.parquet")),
        lambda: (workflow.workdir / "logs" / "rec" / "aggregate.log").exists(),
    ]
    killed = [run_until(workflow, point) for point in kill_points]
    assert killed[0], "the first kill point is reached in every run"
    final = workflow.run()
    assert final.returncode == 0
    assert outputs(workflow.workdir) == expected
    translated = Counter(line for line in recorded(record) if line != "LOAD")
    assert set(translated) == set(DIRECTIONS)
    assert max(translated.values()) <= 2, translated
    assert "Nothing to be done" in workflow.run("--dry-run").stdout


def test_no_second_run_beside_a_live_one_even_after_unlock(
    workflow: Workflow, dataset: Path
) -> None:
    """Snakemake advises --unlock when a folder is locked; while the run that holds the locks
    lives, the advice is qualified with its PID and host, and a run started after --unlock
    stops before it translates anything."""
    record = workflow.workdir / "record.txt"
    held = workflow.workdir / "hold"
    held.touch()
    model = recording_model("rec", record, hang_on_target="fra_Latn", hang_while_exists=str(held))
    first_direction, hanging = "eng_Latn-deu_Latn", "eng_Latn-fra_Latn"
    workflow.write_config(
        bounds_config(
            dataset, shards=1, directions={"list": [first_direction, hanging]}, models=[model]
        )
    )
    first = workflow.start("translations")
    try:
        done = workflow.workdir / f"runs/rec/.provenance/{first_direction}.jsonl.json"
        deadline = time.monotonic() + patience(120)
        while not done.exists():
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        who = f"PID {first.pid} on host {socket.gethostname()}"

        locked = workflow.run("translations", check=False)
        assert locked.returncode != 0
        assert "--unlock" in locked.stdout + locked.stderr
        assert f"still working in this folder ({who})" in locked.stderr, locked.stderr

        workflow.run("--unlock")
        second = beside(workflow, lambda: recorded(record).count("LOAD") > 1)
        assert second.returncode != 0
        assert (
            f"another run of this workflow is working on the same outputs in this folder ({who})"
            in (second.stdout)
        ), second.stdout
        assert recorded(record) == ["LOAD", first_direction]
        assert first.poll() is None, "the first run goes on"
    finally:
        held.unlink()
        output, _ = first.communicate(timeout=patience(300))
    assert first.returncode == 0, output
    assert recorded(record) == ["LOAD", first_direction, hanging]


def beside(workflow: Workflow, working: Callable[[], bool]) -> subprocess.CompletedProcess:
    """A second run, in a process group of its own: killed, and the test failed, as soon as
    `working()` says it has started working (it would wait on the first run's hold)."""
    process = subprocess.Popen(
        workflow.command("translations"),
        cwd=workflow.workdir.parent,
        env=workflow.environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + patience(120)
    while process.poll() is None:
        if working() or time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail("a second run started working beside the first")
        time.sleep(0.1)
    output = process.stdout.read() if process.stdout else ""
    return subprocess.CompletedProcess(process.args, process.returncode, output)


# Parses the workflow through Snakemake's API, as every snakemake command does first, and says
# whether the process's environment and command line came out as they went in.
PARSE_ONLY = """
import json, os, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
environment, argv = dict(os.environ), list(sys.argv)
snakefile, configfile, workdir = map(Path, sys.argv[1:4])
with SnakemakeApi(OutputSettings()) as api:
    api.workflow(
        resource_settings=ResourceSettings(cores=1),
        config_settings=ConfigSettings(configfiles=[configfile]),
        snakefile=snakefile,
        workdir=workdir,
    ).list_rules()
print(json.dumps({"environment": dict(os.environ) == environment, "argv": sys.argv == argv}))
"""


def files_under(folder: Path) -> dict[str, int]:
    """Every file and when it was written, but for Snakemake's own records (its logs and
    caches); its locks and the workflow's records are counted."""
    snakemake = folder / ".snakemake"
    counted = (snakemake / "locks", snakemake / "bouquet-eval")
    return {
        str(path): path.stat().st_mtime_ns
        for path in folder.rglob("*")
        if path.is_file()
        and (snakemake not in path.parents or any(kept in path.parents for kept in counted))
    }


def test_parsing_and_dry_runs_leave_a_killed_runs_locks_the_run_removes_them(
    workflow: Workflow, dataset: Path
) -> None:
    """Parsing writes nothing and changes neither the environment nor the command line; a dry
    run leaves the locks a killed run left; the real run removes them and works."""
    workflow.write_config(crash_config(dataset, workflow.workdir / "record.txt"))
    ended = subprocess.Popen(["true"])
    ended.wait()
    runs = workflow.workdir / ".snakemake" / "bouquet-eval" / "runs"
    runs.mkdir(parents=True)
    (runs / f"{socket.gethostname()}-{ended.pid}.json").write_text(
        json.dumps({"host": socket.gethostname(), "pid": ended.pid, "started": "1"})
    )
    lock = workflow.workdir / ".snakemake" / "locks" / "0.input.lock"
    lock.parent.mkdir()
    lock.write_text("runs/rec/eng_Latn-deu_Latn.jsonl\n")
    before = files_under(workflow.workdir)

    parsed = subprocess.run(
        [sys.executable, "-c", PARSE_ONLY]
        + [str(path) for path in (SNAKEFILE, workflow.config_path, workflow.workdir)]
        # A secret-named setting on the command line: it stays there as it was given.
        + ["api_key=sk-test-0123456789"],
        env=workflow.environment(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(parsed.stdout.splitlines()[-1]) == {"environment": True, "argv": True}
    assert files_under(workflow.workdir) == before

    dry = workflow.run("--dry-run")
    assert "removed the locks" not in dry.stderr
    assert files_under(workflow.workdir) == before

    real = workflow.run()
    assert "removed the locks that a killed run left" in real.stderr, real.stderr
    assert not lock.exists()
    assert (workflow.workdir / "runs" / "rec" / "scores.csv").is_file()
