"""Rule scripts are safe to re-import in a child process started with `spawn`.

Snakemake runs a rule script as a copy with its preamble, which defines `snakemake` and sets
`__file__` to the rule script itself. A child started with `spawn` (vLLM's engine core is one)
re-imports that file, without the preamble, as `__mp_main__`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPOSITORY

RULE_FILES = [*(REPOSITORY / "workflow").glob("**/*.smk"), REPOSITORY / "workflow" / "Snakefile"]
# Each rule's `script:` directive names its script relative to the rule file.
RULE_SCRIPTS = sorted(
    {
        (rules.parent / name).resolve()
        for rules in RULE_FILES
        for name in re.findall(r'script:\s*\n\s*"([^"]+\.py)"', rules.read_text())
    }
)

# The parent takes the rule script's place as the main module, as Snakemake's preamble makes
# it, then starts a child with `spawn`; the child's exit status is the parent's.
SPAWN_A_CHILD = """
import __main__, multiprocessing, os, sys

__main__.__file__ = sys.argv[1]
child = multiprocessing.get_context("spawn").Process(target=os.getpid)
child.start()
child.join()
sys.exit(child.exitcode)
"""


def test_every_rule_script_is_found() -> None:
    assert {path.name for path in RULE_SCRIPTS} >= {"translate.py", "score.py", "aggregate.py"}
    assert all(path.is_file() for path in RULE_SCRIPTS)


@pytest.mark.parametrize("script", RULE_SCRIPTS, ids=lambda path: path.stem)
def test_a_spawned_child_reimports_the_rule_script(script: Path) -> None:
    finished = subprocess.run(
        [sys.executable, "-c", SPAWN_A_CHILD, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    # The child did import it: a script that failed to import would say so here.
    assert finished.stderr == "", finished.stderr[-3000:]
