"""Telling the locks of a killed run from those of a running one.

Snakemake locks its working directory while a run goes and unlocks it when the run ends; a run
that is killed (SIGKILL, a lost node, a closed terminal) leaves its locks, and the next run
stops with a LockException until someone runs `--unlock`. Snakemake does not record who holds
a lock, so each run of the workflow records itself here while it lives: when locks exist and
every run recorded is a process of this machine that no longer exists, the locks are stale and
are removed, and "rerun the same command" works after a crash. Runs recorded on another
machine (a shared filesystem) are never presumed dead.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import socket
from pathlib import Path

log = logging.getLogger(__name__)

RUNS = Path(".snakemake") / "bouquet-eval" / "runs"
LOCKS = Path(".snakemake") / "locks"


def _start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot), or None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name, in parentheses, may hold spaces; the fields after it are fixed.
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(record: dict) -> bool:
    if record.get("host") != socket.gethostname():
        return True
    return _start_time(int(record["pid"])) == record.get("started")


def register(workdir: Path = Path()) -> Path:
    """Record this process as a run of the workflow until it exits."""
    folder = workdir / RUNS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{socket.gethostname()}-{os.getpid()}.json"
    record = {"host": socket.gethostname(), "pid": os.getpid(), "started": _start_time(os.getpid())}
    path.write_text(json.dumps(record), encoding="utf-8")
    atexit.register(path.unlink, missing_ok=True)
    return path


def remove_stale_locks(workdir: Path = Path()) -> list[Path]:
    """Remove the locks if every recorded run is gone (see the module docstring); return them.

    Records of runs that are gone are removed too. Call before `register`.
    """
    locks = sorted((workdir / LOCKS).glob("*.lock"))
    records = sorted((workdir / RUNS).glob("*.json"))
    alive = False
    for path in records:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
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
