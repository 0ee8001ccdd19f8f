"""The workflow on a real one-node Slurm cluster, through profiles/slurm.

The cluster is installed (Debian's packages) and started once for this module, and its
daemons are stopped at the end. Machines that cannot run it (no root, no apt) skip these tests
with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from .conftest import PLUGINS, REPOSITORY, SNAKEFILE, Workflow, python_path
from .slurm.cluster import LocalSlurm, install, unavailable_reason
from .test_workflow import SAMPLE_DIRECTIONS, SMALL_JOBS, recording_model

PROFILES = ("--profile", str(REPOSITORY / "profiles" / "slurm"),
            "--profile", str(REPOSITORY / "tests" / "slurm" / "profile"))  # fmt: skip


@pytest.fixture(scope="module")
def slurm():
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no Slurm cluster on this machine: {reason}")
    install()
    # Not under pytest's private temporary folder: munged runs as its own user.
    root = Path(tempfile.mkdtemp(prefix="bouquet-eval-slurm-"))
    root.chmod(0o755)
    cluster = LocalSlurm(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
    assert not cluster.running_daemons(), "Slurm daemons survived the tests"
    shutil.rmtree(root)


def completed_jobs(cluster: LocalSlurm) -> dict[str, str]:
    """Slurm's own record of finished jobs: job id -> state."""
    if not cluster.jobcomp.exists():
        return {}
    return dict(re.findall(r"JobId=(\d+) .*?JobState=(\S+)", cluster.jobcomp.read_text()))


def sample_config(dataset: Path, record: Path, **model_settings) -> dict:
    return {
        "dataset": {"path": str(dataset)},
        "shards": 2,
        "metrics": ["chrf", "recording:LoadCountingMetric"],
        "resources": SMALL_JOBS,
        "models": [
            {**recording_model("rec", record, record_devices=True, **model_settings), "gpus": 1}
        ],
    }


def test_workflow_through_sbatch(slurm: LocalSlurm, workflow: Workflow, dataset: Path,
                                 tmp_path: Path) -> None:  # fmt: skip
    record = workflow.workdir / "record.txt"
    metric_record = workflow.workdir / "metric.txt"
    workflow.write_config(sample_config(dataset, record))
    environment = {**slurm.environment, "RECORDING_METRIC_FILE": str(metric_record)}
    before = set(completed_jobs(slurm))
    workflow.run(*PROFILES, env=environment)

    jobs = {job: state for job, state in completed_jobs(slurm).items() if job not in before}
    assert len(jobs) == 4 and set(jobs.values()) == {"COMPLETED"}  # 2 translate + 2 score shards
    # Translate jobs asked for a GPU and Slurm gave each one.
    uses = [line.split() for line in Path(f"{record}.devices").read_text().splitlines()]
    assert len(uses) == len(SAMPLE_DIRECTIONS)
    assert {job for *_, job in uses} <= set(jobs) and len({job for *_, job in uses}) == 2
    assert {device for _, device, *_ in uses} <= {"0", "1"}
    # Score jobs (chrF++ and a CPU metric) asked for none.
    metric_loads = [line.split() for line in metric_record.read_text().splitlines()]
    assert len(metric_loads) == 2
    assert {devices for _, _, devices, _ in metric_loads} == {"none"}
    assert {job for *_, job in metric_loads} <= set(jobs)

    # The same configuration run locally gives the same outputs.
    local = Workflow(tmp_path / "local")
    local.workdir.mkdir()
    local_config = sample_config(dataset, tmp_path / "local-record.txt")
    local.write_config(local_config)
    local.run(env={"RECORDING_METRIC_FILE": str(tmp_path / "local-metric.txt")})
    for direction in SAMPLE_DIRECTIONS:
        ours = workflow.workdir / "runs" / "rec" / f"{direction}.jsonl"
        theirs = local.workdir / "runs" / "rec" / f"{direction}.jsonl"
        assert ours.read_bytes() == theirs.read_bytes()
        pd.testing.assert_frame_equal(
            pd.read_parquet(ours.with_suffix(".scored.parquet")),
            pd.read_parquet(theirs.with_suffix(".scored.parquet")),
        )
    pd.testing.assert_frame_equal(
        pd.read_csv(workflow.workdir / "runs" / "rec" / "scores.csv"),
        pd.read_csv(local.workdir / "runs" / "rec" / "scores.csv"),
    )


def running_translate_jobs(slurm: LocalSlurm) -> list[str]:
    listing = subprocess.run(
        ["squeue", "-h", "-t", "RUNNING", "-o", "%i %k"],
        capture_output=True,
        text=True,
        env={**os.environ, **slurm.environment},
    )
    return [line.split()[0] for line in listing.stdout.splitlines() if "translate" in line]


def test_cancelled_job_resumes_where_it_stopped(slurm: LocalSlurm, workflow: Workflow,
                                               dataset: Path) -> None:  # fmt: skip
    record = workflow.workdir / "record.txt"
    workflow.write_config(sample_config(dataset, record, direction_seconds=1.0))
    environment = {
        **os.environ,
        **slurm.environment,
        "PYTHONPATH": python_path(PLUGINS),
        "RECORDING_METRIC_FILE": str(workflow.workdir / "metric.txt"),
    }
    command = [
        sys.executable, "-m", "snakemake", "--snakefile", str(SNAKEFILE),
        "--directory", str(workflow.workdir), "--cores", "2", *PROFILES,
        "--configfile", str(workflow.config_path),
    ]  # fmt: skip
    run = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = [line for line in record.read_text().splitlines()] if record.exists() else []
            if len([line for line in done if line != "LOAD"]) >= 3:
                break
            time.sleep(0.2)
        cancelled = running_translate_jobs(slurm)
        assert cancelled, "no translate job was running"
        subprocess.run(["scancel", *cancelled], check=True, env=environment)
        assert run.wait(timeout=120) != 0
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
            run.wait(timeout=30)
    finished = [line for line in record.read_text().splitlines() if line != "LOAD"]
    assert 0 < len(finished) < len(SAMPLE_DIRECTIONS)

    record.unlink()
    workflow.run(*PROFILES, env={**slurm.environment, **{
        "RECORDING_METRIC_FILE": str(workflow.workdir / "metric.txt")}})  # fmt: skip
    recomputed = [line for line in record.read_text().splitlines() if line != "LOAD"]
    assert sorted(recomputed + finished) == sorted(d.name for d in SAMPLE_DIRECTIONS)
    assert len(list((workflow.workdir / "runs" / "rec").glob("*.scored.parquet"))) == len(
        SAMPLE_DIRECTIONS
    )
