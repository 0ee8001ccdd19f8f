"""Shared memory a killed job leaves behind, released by its next run.

vLLM's engine passes its messages through POSIX shared memory (`/dev/shm/psm_*`, a few hundred
MiB each, and the `sem.*` of its locks). It unlinks them when it shuts down, and Python's
resource tracker when the engine's processes die, but a job killed with SIGKILL (a cancelled
Slurm job, an out-of-memory kill, `kill -9`) takes the tracker with it and leaves them in
`/dev/shm`, where they hold memory until the machine restarts.

So a job keeps a ledger (`SharedMemoryLedger`): while it runs, a thread writes down every entry
of `/dev/shm` that appeared since the job started and that a process of the job's own tree has
open or mapped, or that no process has (never one that another job holds). The next run of the
same job, on the same machine, reads the ledger first and unlinks each entry of it that is
still there, that belongs to this user and that no live process has open or mapped, and then
starts a ledger of its own. Entries of other jobs and other users are never touched. Where
there is no `/dev/shm` and no `/proc` (not Linux), nothing is done.

The same thread keeps the list of the processes the job started, and theirs: a job stopped by
Ctrl-C kills those still running (`SharedMemoryLedger.stop_descendants`), so that it ends in
seconds. vLLM's workers otherwise outlive their engine by tens of seconds, holding the job, and
Snakemake, until they notice.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

from bouquet_eval.core.io import write_json

log = logging.getLogger(__name__)

SHARED_MEMORY = Path("/dev/shm")
PROC = Path("/proc")
WATCH_INTERVAL = 2.0
"""Seconds between two looks for new entries."""


def _entries() -> set[str]:
    try:
        return set(os.listdir(SHARED_MEMORY))
    except OSError:
        return set()


def _processes() -> dict[int, tuple[int, str]]:
    """Every process: its parent and its start time (which tells it from a later process
    given the same number), from /proc."""
    found = {}
    for entry in PROC.glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended
        found[int(entry.parent.name)] = (int(fields[1]), fields[19])
    return found


def _tree(root: int, processes: dict[int, tuple[int, str]] | None = None) -> set[int]:
    """`root` and its descendants."""
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in (processes if processes is not None else _processes()).items():
        children.setdefault(parent, []).append(pid)
    tree, pending = set(), [root]
    while pending:
        pid = pending.pop()
        tree.add(pid)
        pending.extend(children.get(pid, []))
    return tree


def _held(processes: set[int] | None) -> set[str]:
    """The entries of /dev/shm that `processes` (every readable one where None) have open or
    mapped."""
    pids = (
        processes
        if processes is not None
        else {int(path.name) for path in PROC.iterdir() if path.name.isdigit()}
    )
    prefix = f"{SHARED_MEMORY}/"
    held = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in (PROC / str(pid) / "maps").read_text().splitlines():
                path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
                if path.startswith(prefix):
                    held.add(path[len(prefix) :].removesuffix(" (deleted)"))
        with contextlib.suppress(OSError):
            for fd in (PROC / str(pid) / "fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith(prefix):
                        held.add(target[len(prefix) :].removesuffix(" (deleted)"))
    return held


def _is_resource_tracker(pid: int) -> bool:
    try:
        command = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return False
    return b"multiprocessing.resource_tracker" in command


class SharedMemoryLedger:
    """The shared memory of one job (its ledger at `path`); see the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.host = socket.gethostname()
        self.recorded: set[str] = set()
        self.descendants: dict[int, str] = {}
        """The processes this one started, and theirs (pid -> start time), as last seen."""
        self._stop = threading.Event()

    def release_leftovers(self) -> list[str]:
        """Unlink what the previous run of the job on this machine left; the names unlinked."""
        try:
            ledger = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        if ledger.get("host") != self.host:
            return []  # another machine's /dev/shm
        names = {str(name) for name in ledger.get("entries", []) if "/" not in str(name)}
        left = names & _entries()
        held = _held(None) if left else set()
        released = []
        for name in sorted(left - held):
            path = SHARED_MEMORY / name
            with contextlib.suppress(OSError):
                if path.stat().st_uid == os.getuid():
                    path.unlink()
                    released.append(name)
        with contextlib.suppress(OSError):
            self.path.unlink()
        if released:
            log.info(
                "released %d shared-memory entries that a killed run of this job left in %s: %s",
                len(released),
                SHARED_MEMORY,
                ", ".join(released),
            )
        return released

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """While the block runs, record the entries this process's tree creates; afterwards,
        forget the ledger if they are all gone."""
        if not SHARED_MEMORY.is_dir() or not PROC.is_dir():
            yield
            return
        self.release_leftovers()
        before = _entries()
        thread = threading.Thread(target=self._watch, args=(before,), daemon=True)
        thread.start()
        try:
            yield
        except KeyboardInterrupt:
            self.stop_descendants()
            raise
        finally:
            self._stop.set()
            thread.join()
            self._look(before)
            # What is still there now is mostly released as the process exits (vLLM shuts
            # its engine down then): the ledger stays for the next run to look at.
            if not self.recorded & _entries():
                with contextlib.suppress(OSError):
                    self.path.unlink()

    def _watch(self, before: set[str]) -> None:
        while not self._stop.wait(WATCH_INTERVAL):
            self.note_descendants()
            self._look(before)

    def note_descendants(self) -> None:
        """Add the processes this one has started, and theirs, to `descendants`."""
        processes = _processes()
        self.descendants.update(
            (pid, processes[pid][1]) for pid in _tree(os.getpid(), processes) - {os.getpid()}
        )

    def stop_descendants(self) -> list[int]:
        """Kill the processes this one started, and theirs, that still run (Ctrl-C reached
        them all, but vLLM's workers wait for their engine to tell them to stop, for tens of
        seconds once it has died); not Python's resource tracker, which releases what they
        held once they are gone. The pids killed."""
        self.note_descendants()
        processes = _processes()
        killed = []
        for pid, started in self.descendants.items():
            if processes.get(pid, (0, ""))[1] != started or _is_resource_tracker(pid):
                continue
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        if killed:
            log.info("stopped %d processes the job had started: %s", len(killed), killed)
        return killed

    def _look(self, before: set[str]) -> None:
        new = _entries() - before - self.recorded
        if not new:
            return
        # Ours: held by a process of this job, or by none (a semaphore's file stays unmapped
        # between uses); not an entry another job holds.
        ours = (new & _held(_tree(os.getpid()))) | (new - _held(None))
        if ours:
            self.recorded |= ours
            write_json(self.path, {"host": self.host, "entries": sorted(self.recorded)})
