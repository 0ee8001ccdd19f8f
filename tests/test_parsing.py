"""Parsing the workflow writes nothing, in every mode, run as `bouquet-eval` runs it: with its
variables set, against a dataset on the Hub (the local stand-in, tests/hub_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

from bouquet_eval.planning.runs import COMMAND_VARIABLE
from bouquet_eval.planning.selection import SELECTION_FILE_VARIABLE

from .conftest import Workflow
from .hub_datasets import SENTENCE_LEVEL, bouquet_on_hub
from .hub_server import HubServer


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
    selection_file = tmp_path / "logs" / "run.selection.json"
    with HubServer() as hub:
        bouquet = bouquet_on_hub(hub, dataset)
        hub.grant("hf_reader", bouquet)
        cache = tmp_path / "hf"
        environment = {
            **hub.environment(cache, token="hf_reader"),
            # What `bouquet-eval run` sets for the Snakemake it starts (command/run.py).
            SELECTION_FILE_VARIABLE: str(selection_file),
            COMMAND_VARIABLE: json.dumps(["bouquet-eval", "run", "--output-dir", "runs/copy"]),
        }
        before = files_in(workflow.workdir)
        for mode in ("--list-rules", "--lint"):
            parsed = workflow.run(mode, env=environment)
            assert "bouquet-eval:" not in parsed.stderr, parsed.stderr
            assert files_in(workflow.workdir) == before, mode
            assert files_in(cache) == {}, mode
            assert not selection_file.exists(), mode
        # The Hub was asked which files the dataset holds, and nothing was downloaded.
        assert any("/tree/" in request.path for request in hub.requests)
        assert hub.downloads() == []

        # Planning, even a dry run's, downloads the dataset and announces the selection.
        planned = workflow.run("--dry-run", env=environment)
        directions = sorted(path.stem for path in dataset.glob("*.parquet"))
        assert sorted(hub.downloads()) == [
            f"datasets/facebook/bouquet/{SENTENCE_LEVEL}/test/{name}.parquet" for name in directions
        ]
        announced = json.loads(selection_file.read_text(encoding="utf-8"))
        assert announced["directions"] == directions and announced["models"] == ["copy"]
        said = [line for line in planned.stderr.splitlines() if line.startswith("bouquet-eval:")]
        assert said[0].startswith(f"bouquet-eval: {len(directions)} directions, 1 model selected")
