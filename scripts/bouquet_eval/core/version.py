"""The version of the bouquet_eval code that is running, installed or not."""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

# In a checkout (or a copy of one), pyproject.toml sits two levels above the package.
PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def package_version() -> str:
    """The version in the pyproject.toml beside the package, which is the code running even
    when the workflow runs as a module of another one without being installed (or while
    another copy is installed); else the installed distribution's."""
    if PYPROJECT.is_file():
        declared = tomllib.loads(PYPROJECT.read_text()).get("project", {}).get("version")
        if isinstance(declared, str):
            return declared
    try:
        return version("bouquet-eval")
    except PackageNotFoundError:
        return "unknown"
