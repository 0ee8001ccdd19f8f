"""Packages that cannot live beside the project's pins, installed once into pytest's cache."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest


def installed_site(
    request: pytest.FixtureRequest, name: str, requirements: Sequence[str], *options: str
) -> Path:
    """A folder of `requirements` (exact versions, dependencies listed: none is resolved) for
    PYTHONPATH, under pytest's cache, installed once for these requirements."""
    cache = getattr(request.config, "cache", None)
    # Without the cache plugin (-p no:cacheprovider), a fresh install for this session.
    folder = (
        cache.mkdir(name) if cache else request.getfixturevalue("tmp_path_factory").mktemp(name)
    )
    site = folder / "site"
    listed = "\n".join([*requirements, *options]).encode()
    complete = folder / f"complete-{hashlib.sha256(listed).hexdigest()[:16]}"
    if not complete.exists():
        shutil.rmtree(site, ignore_errors=True)
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *options]
        command += ["--target", str(site), *requirements]
        installed = subprocess.run(command, capture_output=True, text=True, check=False)
        assert installed.returncode == 0, f"installing {requirements}:\n{installed.stderr}"
        complete.touch()
    return site
