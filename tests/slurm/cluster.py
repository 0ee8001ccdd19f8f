"""A real one-node Slurm cluster on localhost, for the tests (Debian's slurm-wlm and munge).

The node advertises two fake GPUs as GRES (device files that point to /dev/null), which is
enough for Slurm to allocate them and set CUDA_VISIBLE_DEVICES in jobs. Everything it writes
lives in one folder; the daemons are stopped by their pid files.

Slurm's commands inside a job find the cluster through /etc/slurm/slurm.conf (Snakemake's job
step drops SLURM_CONF), so one machine can hold one such cluster at a time: test sessions that
run side by side (several checkouts, CI) take turns through a lock, instead of talking to each
other's daemons. Every process of the cluster and of its jobs carries MARKER in its
environment, which is how `leftover_processes` finds what outlived the cluster.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

GPUS = 2
# The node's GPU type and a feature of the node, for requests that name them.
GPU_TYPE = "tiny"
NODE_FEATURE = "bouquet"
SLURM_PACKAGES = {"slurmctld": "slurmctld", "slurmd": "slurmd", "sbatch": "slurm-client",
                  "munged": "munge"}  # fmt: skip
# Where Slurm's commands look for the configuration. Snakemake's job step removes every
# SLURM_* variable (SLURM_CONF included) before it calls srun, so the default path must work.
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
MACHINE_LOCK = Path("/tmp/bouquet-eval-test-slurm.lock")
MARKER = "BOUQUET_EVAL_TEST_SLURM"
# Seconds between the SIGTERM and the SIGKILL of a cancelled job's processes.
KILL_WAIT = 2


def unavailable_reason() -> str | None:
    """Why this machine cannot run the cluster, or None when it can."""
    if os.geteuid() != 0:
        return "starting Slurm's daemons needs root"
    if SYSTEM_CONF.exists() and not SYSTEM_CONF.is_symlink():
        return f"{SYSTEM_CONF} exists: this machine has a Slurm of its own, left untouched"
    if all(shutil.which(tool) for tool in SLURM_PACKAGES) or shutil.which("apt-get"):
        return None
    return "Slurm is not installed and there is no apt-get to install it"


def wait_for(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def marked_processes(marker_value: str) -> dict[int, tuple[str, list[bytes]]]:
    """pid -> (command line, environment) of every process whose environment carries
    MARKER=marker_value."""
    needle = f"{MARKER}={marker_value}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environment = (entry / "environ").read_bytes().split(b"\0")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or a kernel thread
            continue
        if needle in environment and command:
            found[int(entry.name)] = (command.strip(), environment)
    return found


def foreign_controller_running() -> bool:
    """Whether SYSTEM_CONF leads to a cluster whose controller still runs (one started by a
    test session that does not take MACHINE_LOCK, such as an older checkout's)."""
    if not SYSTEM_CONF.is_symlink():
        return False
    pid_file = SYSTEM_CONF.resolve().parent / "slurmctld.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
        return Path(f"/proc/{pid}/comm").read_text().strip() == "slurmctld"
    except (OSError, ValueError, IndexError):
        return False


class LocalSlurm:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.conf = root / "slurm.conf"
        self.jobcomp = root / "jobcomp.txt"
        self.munge_socket = root / "munge" / "munge.socket"
        self._lock: int | None = None

    @property
    def environment(self) -> dict[str, str]:
        """What a client (sbatch, squeue, snakemake's executor) needs to reach this cluster."""
        return {"SLURM_CONF": str(self.conf), MARKER: str(self.root)}

    def start(self, wait_for_machine: float = 900) -> None:
        self._take_machine(wait_for_machine)
        self._write_configuration()
        SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
        SYSTEM_CONF.unlink(missing_ok=True)  # a link left by an earlier, killed test run
        SYSTEM_CONF.symlink_to(self.conf)
        daemons = {**os.environ, **self.environment}
        self._start_munge(daemons)
        subprocess.run(["slurmctld", "-f", str(self.conf)], check=True, env=daemons)
        subprocess.run(["slurmd", "-f", str(self.conf)], check=True, env=daemons)
        self._wait_until_idle()

    def stop(self) -> list[tuple[int, str]]:
        """Cancel every job, stop the daemons; return the processes that outlived them.

        Those are killed too, so that a failing test leaves nothing behind either.
        """
        self._cancel_all_jobs()
        for pid_file in self._pid_files():
            if pid_file.exists():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
        wait_for(lambda: not self.running_daemons(), 20)
        leftovers = self.leftover_processes()
        for pid, _ in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if SYSTEM_CONF.is_symlink() and SYSTEM_CONF.resolve() == self.conf.resolve():
            SYSTEM_CONF.unlink()
        self._give_machine_back()
        return leftovers

    def running_daemons(self) -> list[int]:
        running = []
        for pid_file in self._pid_files():
            try:
                text = pid_file.read_text()
            except FileNotFoundError:  # never written, or removed by a daemon that stopped
                continue
            words = text.split()
            if words and Path(f"/proc/{int(words[0])}").exists():
                running.append(int(words[0]))
        return running

    def leftover_processes(self) -> list[tuple[int, str]]:
        """Processes of this cluster or of its jobs that are still running."""
        return [(pid, command) for pid, (command, _) in marked_processes(str(self.root)).items()]

    def job_processes(self) -> list[tuple[int, str]]:
        """Processes of jobs (their step daemons included) that are still running."""
        return [
            (pid, command)
            for pid, (command, environment) in marked_processes(str(self.root)).items()
            if command.startswith("slurmstepd")
            or any(variable.startswith(b"SLURM_JOB_ID=") for variable in environment)
        ]

    def active_jobs(self) -> list[str]:
        listing = self.client(["squeue", "-h", "-o", "%i"])
        return listing.stdout.split()

    def client(self, command: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, **self.environment}
        )

    def _cancel_all_jobs(self) -> None:
        if self.active_jobs():
            self.client(["scancel", *self.active_jobs()])
        # A cancelled job's processes get SIGTERM, then SIGKILL after KILL_WAIT seconds.
        wait_for(lambda: not self.active_jobs(), KILL_WAIT + 15)
        wait_for(lambda: not self.job_processes(), KILL_WAIT + 15)

    def _take_machine(self, timeout: float) -> None:
        """Wait until no other test session runs its cluster on this machine."""
        self._lock = os.open(MACHINE_LOCK, os.O_CREAT | os.O_RDWR, 0o666)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if not foreign_controller_running():
                    return
                fcntl.flock(self._lock, fcntl.LOCK_UN)
            except BlockingIOError:
                pass
            if time.monotonic() > deadline:
                self._give_machine_back()
                raise RuntimeError(
                    f"another test session kept its own Slurm on this machine ({MACHINE_LOCK}, "
                    f"{SYSTEM_CONF}) for {timeout:.0f} s"
                )
            time.sleep(1)

    def _give_machine_back(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor drops the lock
            self._lock = None

    def _pid_files(self) -> list[Path]:
        return [
            self.root / "slurmd.pid",
            self.root / "slurmctld.pid",
            self.root / "munge" / "munged.pid",
        ]

    def _start_munge(self, environment: dict[str, str]) -> None:
        (self.root / "munge").mkdir(exist_ok=True)
        shutil.chown(self.root / "munge", "munge", "munge")
        subprocess.run(
            [
                "runuser", "-u", "munge", "--", "munged",
                f"--socket={self.munge_socket}",
                f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                f"--log-file={self.root / 'munge' / 'munged.log'}",
                f"--seed-file={self.root / 'munge' / 'seed'}",
            ],
            check=True,
            env=environment,
        )  # fmt: skip

    def _write_configuration(self) -> None:
        memory_mb = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 * 0.8)
        devices = self.root / "devices"
        devices.mkdir(exist_ok=True)
        for index in range(GPUS):
            link = devices / f"gpu{index}"
            if not link.is_symlink():
                link.symlink_to("/dev/null")
        (self.root / "spool").mkdir(exist_ok=True)
        (self.root / "state").mkdir(exist_ok=True)
        gres = self.root / "gres.conf"
        gres.write_text(
            f"AutoDetect=off\nNodeName={self.host} Name=gpu Type={GPU_TYPE} "
            f"File={devices}/gpu[0-{GPUS - 1}]\n"
        )
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=bouquet-test",
                    f"SlurmctldHost={self.host}(127.0.0.1)",
                    "SlurmUser=root",
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={self.munge_socket}",
                    "CredType=cred/munge",
                    f"StateSaveLocation={self.root / 'state'}",
                    f"SlurmdSpoolDir={self.root / 'spool'}",
                    f"SlurmctldPidFile={self.root / 'slurmctld.pid'}",
                    f"SlurmdPidFile={self.root / 'slurmd.pid'}",
                    f"SlurmctldLogFile={self.root / 'slurmctld.log'}",
                    f"SlurmdLogFile={self.root / 'slurmd.log'}",
                    # Ports of its own: a daemon left by a killed session cannot answer.
                    f"SlurmctldPort={free_port()}",
                    f"SlurmdPort={free_port()}",
                    # No cgroups here. Process groups, unlike linuxproc's parent links, keep
                    # a job's processes together when their parent dies first (a cancelled
                    # job's batch shell), so that cancelling kills them all.
                    "ProctrackType=proctrack/pgid",
                    f"KillWait={KILL_WAIT}",
                    "TaskPlugin=task/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core_Memory",
                    "DefMemPerCPU=500",
                    "GresTypes=gpu",
                    "AccountingStorageType=accounting_storage/none",
                    "JobCompType=jobcomp/filetxt",
                    f"JobCompLoc={self.jobcomp}",
                    "MinJobAge=300",
                    "ReturnToService=2",
                    "SchedulerParameters=sched_interval=1",
                    f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} "
                    f"RealMemory={memory_mb} Gres=gpu:{GPU_TYPE}:{GPUS} Feature={NODE_FEATURE} "
                    "State=UNKNOWN",
                    f"PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )

    def _wait_until_idle(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self.client(["sinfo", "-h", "-o", "%T"]).stdout.strip()
            if state == "idle":
                return
            time.sleep(0.5)
        raise RuntimeError(f"the Slurm node did not become idle (state '{state}'), see {self.root}")
