"""Debian packages that tests need (a browser, Slurm, Environment Modules), installed on a new
machine by the first test that needs them.

The main suite's files run in several pytest-xdist workers, and checkouts may test side by side:
two `apt-get` runs at once fail on dpkg's lock. So installs take turns through a lock of their
own, and each looks again, once it holds it, for what another has installed meanwhile.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

INSTALL_LOCK = Path("/tmp/bouquet-eval-test-apt.lock")
# Seconds an install waits for a dpkg lock held by anything but these tests (an unattended
# upgrade, a user's apt-get) before apt-get gives up.
FOREIGN_LOCK_WAIT = 600


def missing(packages: dict[str, str]) -> list[str]:
    """The packages (command -> package) whose commands are not on the PATH."""
    return sorted({package for tool, package in packages.items() if not shutil.which(tool)})


def install(packages: dict[str, str]) -> None:
    """Install the Debian packages that provide missing commands (command -> package)."""
    if not missing(packages):
        return
    lock = os.open(INSTALL_LOCK, os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wanted = missing(packages)
        if wanted:
            apt_get("update")
            apt_get("install", "-y", "--no-install-recommends", *wanted)
    finally:
        os.close(lock)


def apt_get(*arguments: str) -> None:
    """Run apt-get; where it fails, the error carries what apt-get said."""
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        subprocess.run(
            ["apt-get", "-q", "-o", f"DPkg::Lock::Timeout={FOREIGN_LOCK_WAIT}", *arguments],
            check=True,
            env=environment,
            capture_output=True,
            text=True,
        )
    except subprocess.CalledProcessError as error:
        error.add_note(error.stderr.strip()[-2000:])
        raise
