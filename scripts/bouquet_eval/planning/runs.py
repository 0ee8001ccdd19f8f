"""Which runs of the workflow are alive in a working directory, and the locks of dead ones.

Snakemake locks its working directory while a run goes and unlocks it when the run ends; a run
that is killed (SIGKILL, a lost node, a closed terminal) leaves its locks, and the next run
stops with a LockException until someone runs `--unlock`. Snakemake does not record who holds
a lock, so each run of the workflow records itself here once it starts (with its command line,
for the manifest its jobs write) and until it exits:
- when locks exist and every run recorded is a process of this machine that no longer exists,
  the locks are stale and are removed, and "rerun the same command" works after a crash;
- a run does not start while another recorded run is alive that is to write any of its
  outputs, even if its locks were removed with `--unlock`: two runs would do the same work.
  Runs of disjoint outputs (parts of one selection, `directions.shard`) go side by side, as
  Snakemake's own locks let them;
- runs recorded on another machine (a shared filesystem) are never presumed dead: where one
  has ended, its record is deleted by hand, as the messages say.
Snakemake checks its locks right after planning, before any hook of the workflow runs, so the
locks of dead runs are removed while Snakemake plans a real run (the workflow's first input
function); everything else happens when the run starts (`onstart`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import socket
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bouquet_eval.core.home import COMMAND_VARIABLE

log = logging.getLogger(__name__)

RUNS = Path(".snakemake") / "bouquet-eval" / "runs"
LOCKS = Path(".snakemake") / "locks"


class RunningError(RuntimeError):
    """Another run of the workflow is alive in the working directory."""


def _start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot), or None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name, in parentheses, may hold spaces; the fields after it are fixed.
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(record: dict[str, Any]) -> bool:
    if record.get("host") != socket.gethostname():
        return True
    return _start_time(int(record["pid"])) == record.get("started")


def _records(workdir: Path) -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for path in sorted((workdir / RUNS).glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(record, dict) and "pid" in record:
            found.append((path, record))
    return found


def live_runs(workdir: Path = Path()) -> list[tuple[Path, dict[str, Any]]]:
    """The runs alive in `workdir`: their record files and records."""
    return [(path, record) for path, record in _records(workdir) if _alive(record)]


def describe_runs(runs: list[tuple[Path, dict[str, Any]]]) -> str:
    return ", ".join(f"PID {record['pid']} on host {record['host']}" for _, record in runs)


def _elsewhere(runs: list[tuple[Path, dict[str, Any]]]) -> str:
    """What to do about runs recorded on other machines, which cannot be seen from here."""
    others = [str(path) for path, record in runs if record.get("host") != socket.gethostname()]
    if not others:
        return ""
    records = " and ".join(others)
    return f" A run of another machine that has ended leaves its record: delete {records}."


def locked_by_a_live_run(workdir: Path = Path()) -> str | None:
    """Where locks exist and a recorded run is alive, a message that names it (Snakemake will
    advise `--unlock`, which would let a second run work beside it); else None."""
    alive = live_runs(workdir)
    if not alive or not any((workdir / LOCKS).glob("*.lock")):
        return None
    return (
        f"bouquet-eval: a run of this workflow is still working in this folder "
        f"({describe_runs(alive)}): wait for it to end or stop it. Do not use --unlock while it "
        f"runs: a second run would not start beside it anyway.{_elsewhere(alive)}"
    )


def refuse_beside_live_runs(outputs: Iterable[str], workdir: Path = Path()) -> None:
    """Raise RunningError, naming the run, while another recorded run is alive that is to write
    any of `outputs` (runs of other outputs, such as parts of one selection, may go together,
    as Snakemake's own locks allow)."""
    ours = set(outputs)
    alive = [
        (path, record)
        for path, record in live_runs(workdir)
        if record["pid"] != os.getpid() and _overlaps(record, ours)
    ]
    if alive:
        raise RunningError(
            f"bouquet-eval: another run of this workflow is working on the same outputs in this "
            f"folder ({describe_runs(alive)}); nothing was started. Wait for it to end or stop it "
            f"(its locks may have been removed with --unlock, but it still runs)."
            f"{_elsewhere(alive)}"
        )


def _overlaps(record: dict[str, Any], outputs: set[str]) -> bool:
    """Whether a recorded run writes any of `outputs` (a record that does not say: yes)."""
    theirs = record.get("outputs")
    return theirs is None or not outputs.isdisjoint(theirs)


def command_line() -> list[str]:
    """This run's command line, as typed (not yet redacted)."""
    given = os.environ.get(COMMAND_VARIABLE)
    return json.loads(given) if given else list(sys.argv)


def register(command: list[str], outputs: Iterable[str], workdir: Path = Path()) -> Path:
    """Record this process as a run of the workflow, its (redacted) command line and the
    outputs it is to write, until it exits."""
    folder = workdir / RUNS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{socket.gethostname()}-{os.getpid()}.json"
    record = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": _start_time(os.getpid()),
        "command": command,
        "outputs": sorted(outputs),
    }
    path.write_text(json.dumps(record), encoding="utf-8")
    atexit.register(path.unlink, missing_ok=True)
    return path


def recorded_command(workdir: Path = Path()) -> list[str] | None:
    """The command line of the run alive in `workdir` (for its jobs: only one run may be)."""
    alive = live_runs(workdir)
    return alive[0][1].get("command") if len(alive) == 1 else None


def remove_stale_locks(workdir: Path = Path()) -> list[Path]:
    """Remove the locks if every recorded run is gone (see the module docstring); return them.

    Records of runs that are gone are removed too.
    """
    locks = sorted((workdir / LOCKS).glob("*.lock"))
    records = _records(workdir)
    alive = False
    for path, record in records:
        if _alive(record):
            alive = True
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    if alive or not locks or not records:
        return []
    for lock in locks:
        lock.unlink(missing_ok=True)
    return locks
