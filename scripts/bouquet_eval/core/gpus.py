"""Giving each concurrent job on one machine GPUs of its own.

Snakemake only counts GPUs (`--resources gpu=N`); which device a job uses is decided here: a
job takes an exclusive lock on one file per device it uses. Two jobs can never hold the same
lock, and the operating system drops the locks of a process that dies, so a crash never leaks
a device.

The devices shared out are those this process may use: inside a Slurm allocation the ones
Slurm gave it (`CUDA_VISIBLE_DEVICES`), so that local jobs in an interactive allocation
(`salloc`) split its GPUs between them; elsewhere `BOUQUET_EVAL_GPUS`, `CUDA_VISIBLE_DEVICES`
or every GPU `nvidia-smi` lists. Leases are kept per host and per allocation: a Slurm job
submitted by the workflow has an allocation of its own, so it takes all of its devices at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

# The devices jobs may share out, e.g. "0,1,2,3", outside a Slurm allocation.
DEVICES_VARIABLE = "BOUQUET_EVAL_GPUS"


def _device_list(value: str) -> list[str]:
    return [device.strip() for device in value.split(",") if device.strip()]


def in_slurm_allocation() -> bool:
    return "SLURM_JOB_ID" in os.environ


def available_devices() -> list[str]:
    """The GPUs jobs started by this process may share out."""
    configured = os.environ.get(DEVICES_VARIABLE, "").strip()
    if configured and in_slurm_allocation():
        # Slurm's choice wins: other devices of the node may belong to other jobs.
        log.info("inside a Slurm allocation: %s is not used", DEVICES_VARIABLE)
    elif configured:
        return _device_list(configured)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return _device_list(visible)
    if shutil.which("nvidia-smi") is None:
        return []
    listing = subprocess.run(
        ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    return listing.stdout.split() if listing.returncode == 0 else []


def lease_scope() -> str:
    """Jobs contend for devices only with jobs on the same host in the same allocation."""
    allocation = os.environ.get("SLURM_JOB_ID", "no-allocation")
    return f"{socket.gethostname()}-{allocation}"


@contextlib.contextmanager
def gpu_lease(
    count: int, lease_dir: Path, poll_seconds: float = 1.0, devices: list[str] | None = None
) -> Iterator[list[str]]:
    """Hold `count` devices for the block and expose only them through CUDA_VISIBLE_DEVICES.

    Yields the leased device ids (empty when no lease is needed or possible). Waits while
    other jobs hold the devices; Snakemake's gpu resource keeps that wait short.
    """
    if count <= 0:
        yield []
        return
    devices = available_devices() if devices is None else devices
    if not devices:
        log.warning("this job asks for %d GPU(s) but none is known: running without", count)
        yield []
        return
    if count > len(devices):
        raise RuntimeError(f"this job needs {count} GPUs but only {len(devices)} exist: {devices}")
    scope_dir = lease_dir / lease_scope()
    scope_dir.mkdir(parents=True, exist_ok=True)
    inherited = os.environ.get("CUDA_VISIBLE_DEVICES")
    with contextlib.ExitStack() as held:
        leased = _acquire(count, devices, scope_dir, held, poll_seconds)
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(leased)
        log.info("leased GPU(s) %s", ",".join(leased))
        try:
            yield leased
        finally:
            if inherited is None:
                del os.environ["CUDA_VISIBLE_DEVICES"]
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = inherited


def _lock_file(lease_dir: Path, device: str) -> Path:
    # Device ids may be UUIDs or MIG names ("MIG-GPU-.../1/0"): keep the file name plain.
    return lease_dir / f"gpu{re.sub(r'[^A-Za-z0-9_.-]', '_', device)}.lock"


def _acquire(
    count: int, devices: list[str], lease_dir: Path, held: contextlib.ExitStack, poll: float
) -> list[str]:
    while True:
        leased = []
        for device in devices:
            handle = open(_lock_file(lease_dir, device), "a")  # noqa: SIM115 (held past here)
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
