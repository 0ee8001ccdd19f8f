"""BLASER 2.0 through the workflow: its score jobs run in BLASER's own environment.

The run's Python has no sonar-space (its pins exclude it); `environments: {blaser: ...}` names
the Python of the environment that has it (.venv-blaser, see the Makefile), which BLASER's
score jobs hand their work to. Tiny random checkpoints are built in that environment
(tests/blaser_checkpoints.py), and the scores the workflow writes are compared with those of
sonar-space's own README pipeline on the same rows (tests/blaser_reference.py), run there too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from .blaser_reference import readme_scores
from .conftest import SAMPLE, Workflow, built_in, environment_python
from .test_command import command
from .test_metric_records import planned_rules
from .workflow_configs import bounds_config

BLASER_PYTHON = environment_python("BLASER", "blaser")
DIRECTIONS = ["eng_Latn-fra_Latn", "fra_Latn-eng_Latn", "eng_Latn-por_Latn_braz1246"]
SONAR = {"eng_Latn": "eng_Latn", "fra_Latn": "fra_Latn", "por_Latn_braz1246": "por_Latn"}
"""The SONAR code of each language of DIRECTIONS, as sonar-space's README is told them."""
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("blaser")
    return built_in(BLASER_PYTHON, "tests.blaser_checkpoints", folder)


def settings(checkpoints: dict[str, str]) -> dict[str, dict[str, str]]:
    """Both forms' sections: the tiny models, on the CPU."""
    return {
        name: {"encoder": checkpoints["encoder"], "checkpoint": checkpoints[name], "device": "cpu"}
        for name in ("blaser", "blaser_qe")
    }


def assert_readme_scores(folder: Path, checkpoints: dict[str, str], tmp_path: Path) -> None:
    """Every direction's scored file holds what sonar-space's README pipeline gives its rows."""
    scored = pd.concat(
        [pd.read_parquet(folder / f"{direction}.scored.parquet") for direction in DIRECTIONS],
        ignore_index=True,
    )
    expected = readme_scores(BLASER_PYTHON, Path(checkpoints["cards"]), scored, SONAR, tmp_path)
    for name in ("blaser", "blaser_qe"):
        if name in scored:
            assert scored[name].tolist() == pytest.approx(expected[name], abs=TOLERANCE, rel=0)
            assert scored[name].nunique() > len(scored) // 2


def test_blaser_added_to_a_finished_run(
    workflow: Workflow, checkpoints: dict[str, str], tmp_path: Path
) -> None:
    """chrF++ first; then both forms of BLASER: only their jobs run, in BLASER's environment,
    with one load of each model, and score as sonar-space's README pipeline does."""
    base = bounds_config(SAMPLE, shards=1, directions={"list": DIRECTIONS})
    base["models"] = base["models"][:1]
    workflow.write_config({**base, "metrics": ["chrf"]})
    workflow.run()
    folder = workflow.workdir / "runs" / "copy-source"
    chrf = folder / "by-metric" / "chrf" / f"{DIRECTIONS[0]}.parquet"
    written = chrf.stat().st_mtime_ns

    metrics = ["chrf", "blaser", "blaser_qe"]
    environments = {"blaser": str(BLASER_PYTHON)}
    config = {**base, "metrics": metrics, "environments": environments, **settings(checkpoints)}
    workflow.write_config(config)
    planned = planned_rules(workflow)
    assert "score_blaser_cpu" in planned and "score" in planned
    assert not {"score_workflow_cpu", "translate"} & planned, planned
    workflow.run(env={"HF_HUB_OFFLINE": "1"})
    assert chrf.stat().st_mtime_ns == written

    log = workflow.workdir / "logs" / "copy-source" / "score" / "blaser_cpu" / "shard0of1.log"
    text = log.read_text()
    assert f"scoring blaser, blaser_qe in {BLASER_PYTHON}" in text
    # One encoder for both forms, and each form's model: once each.
    assert text.count("SONAR text encoder: loading") == 1
    assert text.count("blaser: loading") == 1 and text.count("blaser_qe: loading") == 1
    assert_readme_scores(folder, checkpoints, tmp_path / "readme")
    scores = pd.read_csv(folder / "scores.csv")
    assert {"chrfpp", "blaser", "blaser_qe", "unseen_by"} <= set(scores.columns)
    leaderboard = pd.read_csv(workflow.workdir / "runs" / "leaderboard.csv")
    assert {"blaser", "blaser_qe"} <= set(leaderboard.columns)
    manifest = json.loads((folder / "manifest.json").read_text())
    signatures = manifest["entries"][-1]["metrics"]
    assert signatures["blaser"].startswith(f"encoder:{checkpoints['encoder']}|encoder_commit:local")
    assert "|dtype:float32|sonar:0.5.0|fairseq2:0.8.1" in signatures["blaser_qe"]
    # Nothing to do when run again.
    again = workflow.run("-n", "--quiet", "rules", env={"HF_HUB_OFFLINE": "1"})
    assert "score_blaser" not in again.stdout + again.stderr


def test_bouquet_eval_run_with_blaser(tmp_path: Path, checkpoints: dict[str, str]) -> None:
    """`bouquet-eval run --metrics chrf,blaser`, BLASER's settings and environment given to
    Snakemake as `--config` items, as users write them."""
    (tmp_path / "data").symlink_to(SAMPLE)
    blaser = json.dumps(settings(checkpoints)["blaser"])
    command(
        tmp_path, "run", "--translator", "bouquet_eval.translators.bounds:CopySource",
        "--directions", ",".join(DIRECTIONS), "--metrics", "chrf,blaser",
        "--dataset-path", "data", "--output-dir", "runs/mine", "--cores", "2",
        "--", "--config", f"blaser={blaser}", f'environments={{"blaser": "{BLASER_PYTHON}"}}',
        check=True, env={"HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    folder = tmp_path / "runs" / "mine"
    scores = pd.read_csv(folder / "scores.csv")
    assert len(scores) == len(DIRECTIONS) and scores["blaser"].notna().all()
    assert_readme_scores(folder, checkpoints, tmp_path / "readme")
