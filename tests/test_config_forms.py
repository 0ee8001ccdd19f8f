"""Every form of configuration Snakemake accepts runs the demo through every target: YAML, JSON
(and a .yaml file holding JSON, which Snakemake reads as JSON), several --configfile, --config
overrides of nested keys, a module's config=, and configuration files given to the command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from .conftest import REPOSITORY, SNAKEFILE, Workflow
from .test_module import HOST_SNAKEFILE

DEMO = yaml.safe_load((REPOSITORY / "config" / "demo.yaml").read_text(encoding="utf-8"))
DIRECTIONS = ["eng_Latn-fra_Latn", "fra_Latn-eng_Latn"]
SMALL: dict[str, Any] = {"directions": {"list": DIRECTIONS}, "limit": 3}
TARGETS = ("all", "submission", "compare", "mtme")
# `verify` checks a finished run as it stands: a run of its own, after the others.


def demo_json() -> str:
    """The demo as JSON (two directions, three sentences each)."""
    return json.dumps({**DEMO, **SMALL, "shards": 1}, indent=2)


def asked(workdir: Path) -> str:
    """Snakemake's log of the last run in `workdir`, which names what each job asked for."""
    return sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))[-1].read_text()


def check_outputs(runs: Path, score_mem_mb: int | None = None) -> None:
    """The demo's outputs of every target; what the manifest recorded; what the score jobs
    asked for (resources decide no output, so no manifest records them)."""
    for model in ("copy-source", "reference"):
        verification = pd.read_csv(runs / model / "verification.csv")
        assert set(verification["status"]) == {"ok"}
    for model in ("copy-source", "reference"):
        assert len(pd.read_csv(runs / model / "scores.csv")) == 2
        manifest = json.loads((runs / model / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["entries"][-1]["directions"] == DIRECTIONS
        assert manifest["entries"][-1]["config"]["limit"] == SMALL["limit"]
    if score_mem_mb is not None:
        # The verify run's, whose jobs use the score jobs' resources.
        assert f"mem_mb={score_mem_mb}" in asked(runs.parent)
    # The leaderboard job writes the run's page, a YAML dump of the configuration.
    assert "copy-source" in (runs / "leaderboard.md").read_text(encoding="utf-8")
    assert (runs / "submission" / "reference.tar.gz").is_file()


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_json_configuration_runs_every_target(workflow: Workflow, suffix: str) -> None:
    workflow.config_path = workflow.workdir / f"config{suffix}"
    workflow.config_path.write_text(demo_json(), encoding="utf-8")
    workflow.run(*TARGETS)
    workflow.run("verify")
    check_outputs(workflow.workdir / "runs")


def test_several_files_and_nested_overrides(workflow: Workflow) -> None:
    """Two --configfile (JSON, then YAML), and --config items that set one nested key each."""
    first = workflow.workdir / "demo.json"
    first.write_text(demo_json(), encoding="utf-8")
    second = workflow.workdir / "mine.yaml"
    second.write_text("statistics: {bootstrap_resamples: 100}\n", encoding="utf-8")
    for targets in (TARGETS, ["verify"]):
        workflow.run(
            *targets,
            "--configfile",
            str(first),
            str(second),
            "--config",
            "resources={score: {mem_mb: 900}}",
            "statistics={ar_trials: 100}",
        )
    check_outputs(workflow.workdir / "runs", score_mem_mb=900)
    manifest = json.loads(
        (workflow.workdir / "runs" / "reference" / "manifest.json").read_text(encoding="utf-8")
    )
    statistics = manifest["entries"][-1]["config"]["statistics"]
    assert statistics["bootstrap_resamples"] == 100 and statistics["ar_trials"] == 100


def test_a_modules_configuration_from_json(tmp_path: Path) -> None:
    """The host's configuration file is a .yaml file holding JSON, which Snakemake reads as
    JSON, handed to the module with `config: config`."""
    host = tmp_path / "host"
    (host / "config").mkdir(parents=True)
    (host / "config" / "demo.yaml").write_text(demo_json(), encoding="utf-8")
    (host / "Snakefile").write_text(HOST_SNAKEFILE.format(snakefile=SNAKEFILE), encoding="utf-8")
    for targets in (TARGETS, ["verify"]):
        result = subprocess.run(
            [sys.executable, "-m", "snakemake", "--cores", "2", *targets],
            cwd=host,
            env=Workflow.environment(),
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    check_outputs(host / "runs")


def test_the_command_with_a_json_configuration_file(tmp_path: Path, dataset: Path) -> None:
    extra = tmp_path / "resources.json"
    extra.write_text(json.dumps({"resources": {"score": {"mem_mb": 900}}}), encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable, "-m", "bouquet_eval", "run", "--translator", "copy-source",
            "--directions", "eng_Latn-fra_Latn", "--limit", "3", "--metrics", "chrf",
            "--dataset-path", str(dataset), "--output-dir", "runs/mine", "--cores", "2",
            "--", "--configfile", str(extra),
        ],
        cwd=tmp_path,
        env=Workflow.environment(),
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert "mem_mb=900" in asked(tmp_path / "runs" / "mine")
    assert len(pd.read_csv(tmp_path / "runs" / "mine" / "scores.csv")) == 1
