"""Giving each concurrent job on one machine GPUs of its own.

On a cluster the scheduler assigns devices. On a workstation or a single node, Snakemake only
counts GPUs (`--resources gpu=N`); which device a job uses is decided here: a job takes an
exclusive lock on one file per device it uses. Two jobs can never hold the same lock, and the
operating system drops the locks of a process that dies, so a crash never leaks a device.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

# The devices jobs may share out, e.g. "0,1,2,3"; by default every GPU nvidia-smi lists.
DEVICES_VARIABLE = "BOUQUET_EVAL_GPUS"


def available_devices() -> list[str]:
    configured = os.environ.get(DEVICES_VARIABLE, "").strip()
    if configured:
        return [device.strip() for device in configured.split(",") if device.strip()]
    if shutil.which("nvidia-smi") is None:
        return []
    listing = subprocess.run(
        ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    return listing.stdout.split() if listing.returncode == 0 else []


def assigned_by_scheduler() -> bool:
    """Slurm (or another scheduler, or the user) already chose the devices of this job."""
    return "SLURM_JOB_ID" in os.environ or "CUDA_VISIBLE_DEVICES" in os.environ


@contextlib.contextmanager
def gpu_lease(
    count: int, lease_dir: Path, poll_seconds: float = 1.0, devices: list[str] | None = None
) -> Iterator[list[str]]:
    """Hold `count` devices for the block and expose only them through CUDA_VISIBLE_DEVICES.

    Yields the leased device ids (empty when no lease is needed or possible). Waits while
    other jobs hold the devices; Snakemake's gpu resource keeps that wait short.
    """
    if count <= 0 or assigned_by_scheduler():
        yield []
        return
    devices = available_devices() if devices is None else devices
    if not devices:
        log.warning("this job asks for %d GPU(s) but none is known: running without", count)
        yield []
        return
    if count > len(devices):
        raise RuntimeError(f"this job needs {count} GPUs but only {len(devices)} exist: {devices}")
    lease_dir.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        leased = _acquire(count, devices, lease_dir, held, poll_seconds)
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(leased)
        log.info("leased GPU(s) %s", ",".join(leased))
        try:
            yield leased
        finally:
            del os.environ["CUDA_VISIBLE_DEVICES"]


def _acquire(
    count: int, devices: list[str], lease_dir: Path, held: contextlib.ExitStack, poll: float
) -> list[str]:
    while True:
        leased = []
        for device in devices:
            handle = open(lease_dir / f"gpu{device}.lock", "a")  # noqa: SIM115 (held past here)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            held.callback(handle.close)
            leased.append(device)
            if len(leased) == count:
                return leased
        # Not enough free devices: give back what we took, so that two jobs waiting for two
        # devices each cannot block one another forever.
        held.close()
        time.sleep(poll)
