"""Runs of the workflow alive in a folder, and their records (bouquet_eval.planning.runs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bouquet_eval.planning.runs import (
    RUNS,
    RunningError,
    _start_time,
    refuse_beside_live_runs,
    register,
)


def test_a_run_recorded_on_another_machine_is_named_with_its_record(tmp_path: Path) -> None:
    """It cannot be seen from here, so it is taken for alive: the message says which record to
    delete once it has ended."""
    (tmp_path / RUNS).mkdir(parents=True)
    record = tmp_path / RUNS / "elsewhere-7.json"
    record.write_text(json.dumps({"host": "elsewhere", "pid": 7, "started": "1"}))
    with pytest.raises(RunningError, match=r"PID 7 on host elsewhere.*delete .*elsewhere-7\.json"):
        refuse_beside_live_runs(["runs/a/x.jsonl"], tmp_path)
    record.unlink()
    refuse_beside_live_runs(["runs/a/x.jsonl"], tmp_path)


def test_a_live_run_of_other_outputs_does_not_stop_a_run(tmp_path: Path) -> None:
    """Parts of one selection run side by side; a run that writes what another writes waits."""
    first = register(["snakemake"], ["runs/a/x.jsonl"], tmp_path)
    # Recorded as another process of this machine that is alive: this test's parent.
    record = json.loads(first.read_text())
    parent = {**record, "pid": os.getppid(), "started": _start_time(os.getppid())}
    first.write_text(json.dumps(parent))
    refuse_beside_live_runs(["runs/a/y.jsonl"], tmp_path)
    with pytest.raises(RunningError, match=rf"PID {os.getppid()} on host"):
        refuse_beside_live_runs(["runs/a/y.jsonl", "runs/a/x.jsonl"], tmp_path)
