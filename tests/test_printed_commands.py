"""Every command the project prints works as printed, pasted into a shell in a directory that is
not the repository: the hint of a missing dataset, the documented command that verifies a
received submission, and `${BOUQUET_EVAL_HOME}` in a script of one's own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import yaml

from bouquet_eval.results.verify import OK

from .conftest import REPOSITORY, Workflow
from .hub_datasets import bouquet_on_hub
from .hub_server import HubServer
from .workflow_configs import bounds_config

DIRECTIONS = ["eng_Latn-fra_Latn"]


def pasted(
    command: str, directory: Path, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    """Run `command` in a shell in `directory`, with `snakemake` and `python` on PATH as in the
    environment a user activated; it must succeed unless `check` is false."""
    assert not directory.resolve().is_relative_to(REPOSITORY)
    environment = Workflow.environment(env)
    environment["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    environment.pop("BOUQUET_EVAL_HOME", None)
    finished = subprocess.run(
        ["bash", "-c", command], cwd=directory, env=environment, capture_output=True, text=True
    )
    assert finished.returncode == 0 or not check, f"{command}\n{finished.stdout}\n{finished.stderr}"
    return finished


def test_the_missing_dataset_hint_fetches_it(
    workflow: Workflow, dataset: Path, tmp_path: Path
) -> None:
    with HubServer() as hub:
        bouquet = bouquet_on_hub(hub, dataset)
        hub.grant("hf_reader", bouquet)
        workflow.write_config(
            {
                "dataset": {"name": "facebook/bouquet", "revision": "main"},
                "directions": {"list": DIRECTIONS},
                "limit": 2,
                "models": [{"name": "copy-source", "translator": "copy-source"}],
            }
        )
        cache = tmp_path / "hf"
        offline = {**hub.environment(cache, token="hf_reader"), "HF_HUB_OFFLINE": "1"}
        failed = workflow.run(check=False, env=offline)
        assert failed.returncode != 0
        hint = re.search(r"HF_HOME: `([^`]+)`", failed.stderr)
        assert hint, failed.stderr
        assert hint.group(1).startswith(f"snakemake -s {REPOSITORY}/workflow/Snakefile prefetch ")
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        pasted(hint.group(1), elsewhere, hub.environment(cache, token="hf_reader"))
        workflow.run("all", "submission", env=offline)
    assert len(pd.read_csv(workflow.workdir / "runs" / "copy-source" / "scores.csv")) == 1
    # One direction, two sentences of it: not BOUQuET's full test split, so no eval result,
    # and the submission says why.
    submission = workflow.workdir / "runs" / "submission" / "copy-source"
    assert not list(submission.glob("eval_results_*.yaml"))
    note = (submission / "EVAL_RESULTS.txt").read_text()
    assert "- limit: 2 sentences per direction" in note
    assert "- 1 of the dataset's 20 directions were evaluated" in note
    assert "local folder" not in note  # the dataset came from the Hub, at a commit


def documented_maintainer_command() -> str:
    """The command docs/results.md gives a maintainer to verify a received submission."""
    page = (REPOSITORY / "docs" / "results.md").read_text(encoding="utf-8")
    section = page.split("**Verifying a received submission**", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return block.replace("\\\n", " ").strip()


def test_the_documented_command_verifies_a_received_archive(
    workflow: Workflow, dataset: Path, tmp_path: Path
) -> None:
    config = bounds_config(dataset, directions={"list": DIRECTIONS}, limit=2)
    config["models"] = [{"name": "my-model", "translator": "copy-source"}]
    workflow.write_config(config)
    workflow.run("all")
    # `progress` ends with its table; `submission` saying where the submissions are.
    table = workflow.run("progress", "--nolock")
    assert "bouquet-eval: results in" not in table.stdout + table.stderr
    made = workflow.run("submission").stderr.strip().splitlines()[-1]
    assert made == (
        f"bouquet-eval: submissions in {workflow.workdir / 'runs' / 'submission'}/ (<model>.tar.gz)"
    )
    maintainer = tmp_path / "maintainer"
    (maintainer / "received").mkdir(parents=True)
    shutil.copyfile(
        workflow.workdir / "runs" / "submission" / "my-model.tar.gz",
        maintainer / "received" / "my-model.tar.gz",
    )
    # The maintainer's own configuration: the same dataset and settings, and no model.
    leaderboard = bounds_config(dataset, directions={"list": DIRECTIONS}, limit=2)
    del leaderboard["models"]
    (maintainer / "leaderboard.yaml").write_text(yaml.safe_dump(leaderboard), encoding="utf-8")
    command = documented_maintainer_command()
    assert command.startswith("snakemake -s /path/to/bouquet-eval/workflow/Snakefile verify ")
    command = command.replace("/path/to/bouquet-eval", str(REPOSITORY))
    pasted(command, maintainer)
    verification = pd.read_csv(maintainer / "runs" / "received" / "my-model" / "verification.csv")
    assert set(verification["status"]) == {OK} and len(verification) == 3
    # A tampered score is caught in one line, with no traceback.
    tampered = maintainer / "received" / "tampered"
    shutil.copytree(workflow.workdir / "runs" / "submission" / "my-model", tampered)
    scores = pd.read_csv(tampered / "scores.csv")
    recomputed = float(scores["chrfpp"].iloc[0])
    scores["chrfpp"] += 1
    scores.to_csv(tampered / "scores.csv", index=False)
    failed = pasted(
        command.replace("received/my-model.tar.gz", "received/tampered"), maintainer, check=False
    )
    assert failed.returncode != 0 and "Traceback" not in failed.stderr, failed.stderr
    claim = float(scores["chrfpp"].iloc[0])
    said = [line for line in failed.stderr.splitlines() if "claimed" in line]
    assert said and all(
        re.search(
            rf"verification failed: model 'tampered', direction eng_Latn-fra_Latn, chrfpp: "
            rf"claimed {claim!r}, recomputed {recomputed!r} \(tolerance 1e-09\); all values: "
            rf"{maintainer / 'runs' / 'received' / 'tampered' / 'verification.csv'}$",
            line,
        )
        for line in said
    ), failed.stderr


def test_bouquet_eval_home_in_a_script_of_ones_own(tmp_path: Path) -> None:
    """Outside the workflow, nothing sets BOUQUET_EVAL_HOME: it is this package's repository."""
    script = textwrap.dedent(
        """
        from bouquet_eval.data.dataset import resolve_dataset

        dataset = resolve_dataset({"path": "${BOUQUET_EVAL_HOME}/data/sample/parquet"})
        print(len(dataset.directions()))
        """
    )
    (tmp_path / "mine.py").write_text(script, encoding="utf-8")
    pasted("python mine.py", tmp_path)
