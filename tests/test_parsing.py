"""Parsing the workflow writes nothing, in every mode, run as `bouquet-eval` runs it (its
variables set): against a dataset on the Hub (the local stand-in, tests/hub_server.py), and
against a dataset saved by `datasets` with Met-BOUQuET's judgements on the Hub. What the main
process must fetch or write happens once Snakemake plans the run."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bouquet_eval.planning.runs import COMMAND_VARIABLE
from bouquet_eval.planning.selection import SELECTION_FILE_VARIABLE

from .conftest import Workflow
from .hub_datasets import MET_BOUQUET_FILES, SENTENCE_LEVEL, bouquet_on_hub, met_bouquet_on_hub
from .hub_server import HubServer
from .sample_forms import sample_judgements, save_sample
from .workflow_configs import SAMPLE_DIRECTIONS, met_bouquet_config

NO_RULE_MAKES = "no-rule-makes-this"
PARSES = (("--list-rules",), ("--lint",), ("--dry-run", NO_RULE_MAKES), (NO_RULE_MAKES,))
"""Every mode's parse alone: --list-rules and --lint only parse; a dry run and a real run
asked for a file no rule makes stop after parsing, before Snakemake plans anything."""


def files_in(folder: Path) -> dict[str, int]:
    """Every file under `folder` and when it was written; Snakemake's own records aside (its
    logs and caches under .snakemake/), but for the workflow's under .snakemake/bouquet-eval."""
    snakemake = folder / ".snakemake"
    return {
        str(path): path.stat().st_mtime_ns
        for path in folder.rglob("*")
        if path.is_file()
        and (snakemake not in path.parents or snakemake / "bouquet-eval" in path.parents)
    }


def bouquet_eval_environment(hub: HubServer, home: Path) -> dict[str, str]:
    """The Hub stand-in's variables (its cache under `home`/hf) and those `bouquet-eval run`
    sets for the Snakemake it starts (command/run.py)."""
    return {
        **hub.environment(home / "hf", token="hf_reader"),
        SELECTION_FILE_VARIABLE: str(home / "logs" / "run.selection.json"),
        COMMAND_VARIABLE: json.dumps(["bouquet-eval", "run", "--output-dir", "runs/copy"]),
    }


def parse_in_every_mode(workflow: Workflow, environment: dict[str, str]) -> None:
    """Parse in each of `PARSES`: the working directory, the Hugging Face cache and the
    selection file are left as they were."""
    cache = Path(environment["HF_HOME"])
    selection = Path(environment[SELECTION_FILE_VARIABLE])
    before = files_in(workflow.workdir)
    for mode in PARSES:
        parsed = workflow.run(*mode, env=environment, check=NO_RULE_MAKES not in mode)
        if NO_RULE_MAKES in mode:
            said = parsed.stdout + parsed.stderr
            assert parsed.returncode != 0 and f"No rule to produce {NO_RULE_MAKES}" in said, said
        assert "bouquet-eval:" not in parsed.stderr, (mode, parsed.stderr)
        assert files_in(workflow.workdir) == before, mode
        assert files_in(cache) == {}, mode
        assert not selection.exists(), mode


def test_parsing_writes_nothing_and_planning_fetches(
    workflow: Workflow, dataset: Path, tmp_path: Path
) -> None:
    workflow.write_config(
        {
            "output_dir": "runs",
            "metrics": ["chrf"],
            "models": [{"name": "copy", "translator": "copy-source"}],
        }
    )
    with HubServer() as hub:
        bouquet = bouquet_on_hub(hub, dataset)
        hub.grant("hf_reader", bouquet)
        environment = bouquet_eval_environment(hub, tmp_path)
        parse_in_every_mode(workflow, environment)
        # The Hub was asked which files the dataset holds, and nothing was downloaded.
        assert any("/tree/" in request.path for request in hub.requests)
        assert hub.downloads() == []

        # Planning, even a dry run's, downloads the dataset and announces the selection.
        planned = workflow.run("--dry-run", env=environment)
        directions = sorted(path.stem for path in dataset.glob("*.parquet"))
        assert sorted(hub.downloads()) == [
            f"datasets/facebook/bouquet/{SENTENCE_LEVEL}/test/{name}.parquet" for name in directions
        ]
        selection = Path(environment[SELECTION_FILE_VARIABLE])
        announced = json.loads(selection.read_text(encoding="utf-8"))
        assert announced["directions"] == directions and announced["models"] == ["copy"]
        said = [line for line in planned.stderr.splitlines() if line.startswith("bouquet-eval:")]
        assert said[0].startswith(f"bouquet-eval: {len(directions)} directions, 1 model selected")


def test_a_saved_dataset_and_met_bouquet_are_made_ready_while_planning(
    workflow: Workflow, dataset: Path, tmp_path: Path
) -> None:
    """Parsing reads the saved table and Met-BOUQuET's judgements (from the Hub, into memory:
    the judged systems decide the plan's jobs) and writes neither; planning lays the saved
    table out per direction and downloads the judgements into the cache, for the jobs."""
    pytest.importorskip("datasets")
    saved = tmp_path / "saved"
    save_sample(saved)
    table = sample_judgements()
    config = {**met_bouquet_config(), "output_dir": "runs", "dataset": {"path": str(saved)}}
    workflow.write_config(config)
    with HubServer() as hub:
        bouquet = bouquet_on_hub(hub, dataset)
        commit = met_bouquet_on_hub(bouquet, table, tmp_path / "judged")
        hub.grant("hf_reader", bouquet)
        environment = bouquet_eval_environment(hub, tmp_path)
        parse_in_every_mode(workflow, environment)
        judgements = {f"datasets/facebook/bouquet/{name}" for name in MET_BOUQUET_FILES}
        # Only the judgements were read, each parse: the dataset's own files are not the Hub's.
        assert set(hub.downloads()) == judgements
        assert len(hub.downloads()) == len(PARSES) * len(judgements)
        hub.clear()

        # Planning, even a dry run's, lays the saved table out and downloads the judgements.
        before = files_in(workflow.workdir)
        workflow.run("--dry-run", "metaeval", env=environment)
        written = sorted(set(files_in(workflow.workdir)) - set(before))
        layouts = workflow.workdir / ".snakemake" / "bouquet-eval" / "saved-datasets"
        (layout,) = layouts.iterdir()
        assert written == sorted(str(layout / f"{d}.parquet") for d in SAMPLE_DIRECTIONS)
        # Read into memory by its parse, then downloaded into the cache by its planning.
        assert sorted(hub.downloads()) == sorted([*judgements, *judgements])
        snapshot = tmp_path / "hf" / "hub" / "datasets--facebook--bouquet" / "snapshots" / commit
        assert all((snapshot / name).is_file() for name in MET_BOUQUET_FILES)

        # A parse now reads what planning left: the layout, and the judgements in the cache.
        hub.clear()
        before = files_in(workflow.workdir)
        workflow.run("--list-rules", env=environment)
        assert files_in(workflow.workdir) == before and hub.downloads() == []

        # The jobs read them there too.
        workflow.run("metaeval", env=environment)
    frame = pd.read_csv(workflow.workdir / "runs" / "metaeval" / "correlations.csv")
    assert frame[frame["name"] == "all"]["n_segments"].tolist() == [len(table)]
