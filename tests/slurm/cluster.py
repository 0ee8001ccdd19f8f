"""A real one-node Slurm cluster on localhost, for the tests (Debian's slurm-wlm and munge).

The node advertises two fake GPUs as GRES (device files that point to /dev/null), which is
enough for Slurm to allocate them and set CUDA_VISIBLE_DEVICES in jobs. Everything it writes
lives in one folder; the daemons are stopped by their pid files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
GPUS = 2
# Where Slurm's commands look for the configuration. Snakemake's job step removes every
# SLURM_* variable (SLURM_CONF included) before it calls srun, so the default path must work.
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")


def unavailable_reason() -> str | None:
    """Why this machine cannot run the cluster, or None when it can."""
    if os.geteuid() != 0:
        return "starting Slurm's daemons needs root"
    if SYSTEM_CONF.exists() and not SYSTEM_CONF.is_symlink():
        return f"{SYSTEM_CONF} exists: this machine has a Slurm of its own, left untouched"
    if all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "sbatch", "munged")):
        return None
    if shutil.which("apt-get") is None:
        return "Slurm is not installed and there is no apt-get to install it"
    return None


def install() -> None:
    """Install Debian's Slurm and munge unless they are there already (idempotent)."""
    if all(shutil.which(tool) for tool in ("slurmctld", "slurmd", "sbatch", "munged")):
        return
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=environment, capture_output=True)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES],
        check=True,
        env=environment,
        capture_output=True,
    )


class LocalSlurm:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.conf = root / "slurm.conf"
        self.jobcomp = root / "jobcomp.txt"
        self.munge_socket = root / "munge" / "munge.socket"

    @property
    def environment(self) -> dict[str, str]:
        """What a client (sbatch, squeue, snakemake's executor) needs to reach this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def start(self) -> None:
        self._write_configuration()
        SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
        SYSTEM_CONF.unlink(missing_ok=True)  # a link left by an earlier, killed test run
        SYSTEM_CONF.symlink_to(self.conf)
        self._start_munge()
        subprocess.run(["slurmctld", "-f", str(self.conf)], check=True)
        subprocess.run(["slurmd", "-f", str(self.conf)], check=True)
        self._wait_until_idle()

    def stop(self) -> None:
        for pid_file in self._pid_files():
            if pid_file.exists():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.running_daemons():
            time.sleep(0.2)
        if SYSTEM_CONF.is_symlink() and SYSTEM_CONF.resolve() == self.conf.resolve():
            SYSTEM_CONF.unlink()

    def running_daemons(self) -> list[int]:
        running = []
        for pid_file in self._pid_files():
            if pid_file.exists():
                pid = int(pid_file.read_text().split()[0])
                if Path(f"/proc/{pid}").exists():
                    running.append(pid)
        return running

    def _pid_files(self) -> list[Path]:
        return [
            self.root / "slurmd.pid",
            self.root / "slurmctld.pid",
            self.root / "munge" / "munged.pid",
        ]

    def _start_munge(self) -> None:
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
            f"AutoDetect=off\nNodeName={self.host} Name=gpu File={devices}/gpu[0-{GPUS - 1}]\n"
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
                    "SlurmctldPort=16817",
                    "SlurmdPort=16818",
                    "ProctrackType=proctrack/linuxproc",
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
                    f"RealMemory={memory_mb} Gres=gpu:{GPUS} State=UNKNOWN",
                    f"PartitionName=debug Nodes={self.host} Default=YES MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )

    def _wait_until_idle(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            result = subprocess.run(
                ["sinfo", "-h", "-o", "%T"],
                capture_output=True,
                text=True,
                env={**os.environ, **self.environment},
            )
            state = result.stdout.strip()
            if state == "idle":
                return
            time.sleep(0.5)
        raise RuntimeError(f"the Slurm node did not become idle (state '{state}'), see {self.root}")
