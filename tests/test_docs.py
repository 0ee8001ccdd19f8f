"""The command blocks the documentation marks runnable work when pasted, from any folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPOSITORY

# A block marked `<!-- runnable -->` (or `<!-- runnable: name -->`, for a test that also checks
# what the block makes) on the line before its opening fence.
RUNNABLE = re.compile(
    r"^<!-- runnable(?:: [\w-]+)? -->\n```(?P<language>\w+)\n(?P<code>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
INTERPRETERS = {
    "bash": ["bash", "-e", "-u", "-o", "pipefail", "-c"],
    "python": [sys.executable, "-c"],
}


def runnable_blocks() -> list[tuple[str, str, str]]:
    """(where, language, code) of every marked block of README.md and docs/*.md."""
    pages = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]
    blocks = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for block in RUNNABLE.finditer(text):
            line = text.count("\n", 0, block.start()) + 1
            where = f"{page.relative_to(REPOSITORY)}:{line}"
            blocks.append((where, block["language"], block["code"]))
    return blocks


BLOCKS = runnable_blocks()


def test_the_front_page_and_the_python_api_have_runnable_blocks() -> None:
    pages = {where.split(":")[0] for where, _, _ in BLOCKS}
    assert {"README.md", "docs/api.md"} <= pages


@pytest.mark.parametrize(("where", "language", "code"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_runnable_block_succeeds_outside_the_checkout(
    where: str, language: str, code: str, tmp_path: Path
) -> None:
    """Run as a user pastes it: in a folder of their own, with the environment that `make`
    installs active (its bin/ first on PATH; PYTHONPATH, set by conftest, stands in for the
    editable install of this checkout)."""
    assert language in INTERPRETERS, f"{where}: no way to run a {language} block"
    environment = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
    }
    environment.pop("BOUQUET_EVAL_HOME", None)
    finished = subprocess.run(
        [*INTERPRETERS[language], code],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert finished.returncode == 0, f"{where} failed:\n{finished.stdout}\n{finished.stderr}"
