"""Snakemake's locks as the workflow patches them for runs side by side in one folder
(bouquet_eval.planning.snakemake_locks): a run that ends keeps the others' locks, and the
runs that go together are still the ones Snakemake lets go together."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bouquet_eval.planning.snakemake_locks import _SharedLocks, changed_lock_sources

from .conftest import patience, wait_until

SNAKEFILE = """
import time
from bouquet_eval.planning.snakemake_locks import share_locks

def patched(wildcards):
    if config["patch"] and workflow.is_main_process:
        share_locks(workflow.persistence, explain_refusal=lambda: "held by a run beside")
    return []

rule all:
    input: expand("out/{part}/{i}.txt", part=config["part"], i=range(2))

rule make:
    input: patched, "in/{part}.txt"
    output: "out/{part}/{i}.txt"
    shell:
        "touch started-{wildcards.part}; "
        "while [ ! -e go-{wildcards.part} ]; do sleep 0.1; done; touch {output}"
"""


def start(folder: Path, part: str, patch: bool) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "snakemake", "--cores", "1", "--workflow-profile", "none"]
    command += ["--config", f"part={part}", f"patch={int(patch)}"]
    return subprocess.Popen(
        command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish(run: subprocess.Popen[str]) -> str:
    output = run.communicate(timeout=patience(120))[0]
    assert run.returncode == 0, output
    return output


def test_the_patch_is_written_for_the_pinned_snakemake() -> None:
    assert changed_lock_sources() == []


@pytest.mark.parametrize("patch", [True, False], ids=["patched", "snakemake-alone"])
def test_a_run_that_ends_keeps_the_locks_of_the_run_beside_it(tmp_path: Path, patch: bool) -> None:
    """Two runs of disjoint outputs in one folder; the first ends while the second works. Left
    alone, Snakemake removes the second run's locks with its own (the second test case says
    so, and that this test would see it); patched, they stay, and a third run of the second
    one's outputs is refused, naming why."""
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    (tmp_path / "in").mkdir()
    for part in "ab":
        (tmp_path / "in" / f"{part}.txt").write_text(part)
    first, second = start(tmp_path, "a", patch), start(tmp_path, "b", patch)
    try:
        side_by_side(tmp_path, first, second, patch)
    finally:  # a failed assertion leaves no run, and no job, waiting for its signal
        for part in "ab":
            (tmp_path / f"go-{part}").touch()
        for run in (first, second):
            try:
                run.communicate(timeout=patience(120))
            except subprocess.TimeoutExpired:
                run.kill()
                run.communicate()


def side_by_side(
    tmp_path: Path, first: subprocess.Popen[str], second: subprocess.Popen[str], patch: bool
) -> None:
    locks = tmp_path / ".snakemake" / "locks"
    wait_until(lambda: (tmp_path / "started-a").exists(), 60)
    wait_until(lambda: (tmp_path / "started-b").exists(), 60)
    assert len(list(locks.glob("*.lock"))) == 4  # an input and an output lock each
    (tmp_path / "go-a").touch()
    finish(first)
    kept = {line for path in locks.glob("*.lock") for line in path.read_text().split()}
    if not patch:
        assert kept == set()
        (tmp_path / "go-b").touch()
        finish(second)
        return
    assert kept == {"in/b.txt", "out/b/0.txt", "out/b/1.txt"}
    third = start(tmp_path, "b", patch)
    refused = third.communicate(timeout=patience(120))[0]
    assert third.returncode != 0
    assert "held by a run beside\n" in refused and "Directory cannot be locked" in refused
    (tmp_path / "go-b").touch()
    finish(second)
    assert not locks.exists()  # the last run to end removes the folder


def test_runs_that_take_locks_together_write_a_file_each(tmp_path: Path) -> None:
    """Each run takes the first free lock number; one whose number another took meanwhile
    takes the next one, where Snakemake alone would write over the other run's lock."""
    runs = [
        _SharedLocks(SimpleNamespace(_lockdir=str(tmp_path / "locks"), _lockfile={}), str)
        for _ in range(3)
    ]
    for index, run in enumerate(runs):
        run.write_locks("output", [f"out/{index}.txt"])
    assert sorted(run.persistence._lockfile["output"] for run in runs) == [
        str(tmp_path / "locks" / f"{number}.output.lock") for number in range(3)
    ]
    assert sorted(runs[0].read_locks()) == [("output", f"out/{i}.txt") for i in range(3)]
    runs[1].release()
    runs[0].release()
    assert list(runs[2].read_locks()) == [("output", "out/2.txt")]
    runs[2].release()
    assert not (tmp_path / "locks").exists()
    assert list(runs[2].read_locks()) == []
