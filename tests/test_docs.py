"""The command blocks the documentation marks runnable work when pasted, from any folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from .conftest import REPOSITORY, SAMPLE, Workflow
from .workflow_configs import bounds_config

# A block marked `<!-- runnable -->` (or `<!-- runnable: name -->`, whose name says what the block
# makes: see WHAT_BLOCKS_MAKE) on the line before its opening fence.
RUNNABLE = re.compile(
    r"^<!-- runnable(?:: (?P<name>[\w-]+))? -->\n```(?P<language>\w+)\n(?P<code>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
INTERPRETERS = {
    "bash": ["bash", "-e", "-u", "-o", "pipefail", "-c"],
    "python": [sys.executable, "-c"],
}


def runnable_blocks() -> list[tuple[str, str | None, str, str]]:
    """(where, name, language, code) of every marked block of README.md and docs/*.md."""
    pages = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]
    blocks = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for block in RUNNABLE.finditer(text):
            line = text.count("\n", 0, block.start()) + 1
            where = f"{page.relative_to(REPOSITORY)}:{line}"
            blocks.append((where, block["name"], block["language"], block["code"]))
    return blocks


BLOCKS = runnable_blocks()


def test_the_front_page_and_the_python_api_have_runnable_blocks() -> None:
    pages = {where.split(":")[0] for where, _, _, _ in BLOCKS}
    assert {"README.md", "docs/api.md"} <= pages


def made_by_hand(folder: Path, workflow: Workflow) -> None:
    """docs/api.md's "Running one step by hand": a direction out of English scored."""
    scored = sorted(p.name for p in (folder / "runs" / "by-hand").glob("*.scored.parquet"))
    assert scored and all(name.startswith("eng_Latn-") for name in scored)


def made_programmatically(folder: Path, workflow: Workflow) -> None:
    """docs/api.md's programmatic example: two directions translated, which the workflow then
    scores as provided translations."""
    mine = folder / "runs" / "mine"
    produced = sorted(p.name for p in mine.glob("*.jsonl"))
    assert produced == ["eng_Latn-cmn_Hans.jsonl", "eng_Latn-fra_Latn.jsonl"]
    workflow.write_config(
        bounds_config(
            SAMPLE,
            directions={"list": ["eng_Latn-cmn_Hans", "eng_Latn-fra_Latn"]},
            models=[{"name": "mine", "translator": "provided", "path": str(mine)}],
        )
    )
    workflow.run()
    scores = pd.read_csv(workflow.workdir / "runs" / "mine" / "scores.csv")
    assert len(scores) == 2 and (scores["n_sentences"] == 24).all()
    given = pd.read_json(mine / "eng_Latn-fra_Latn.jsonl", lines=True)
    scored = pd.read_parquet(
        workflow.workdir / "runs" / "mine" / "eng_Latn-fra_Latn.scored.parquet"
    )
    assert scored["mt_text"].tolist() == given["mt_text"].tolist()


WHAT_BLOCKS_MAKE = {"by-hand": made_by_hand, "programmatic": made_programmatically}
"""What a named block makes, checked in the folder it ran in (each block runs once)."""


@pytest.mark.parametrize(("where", "name", "language", "code"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_runnable_block_succeeds_outside_the_checkout(
    where: str, name: str | None, language: str, code: str, tmp_path: Path, workflow: Workflow
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
    folder = tmp_path / "user"
    folder.mkdir()
    finished = subprocess.run(
        [*INTERPRETERS[language], code],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert finished.returncode == 0, f"{where} failed:\n{finished.stdout}\n{finished.stderr}"
    if name is not None:
        WHAT_BLOCKS_MAKE[name](folder, workflow)
