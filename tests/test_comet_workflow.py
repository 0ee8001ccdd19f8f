"""The COMET family through the workflow: its score jobs run in COMET's own environment.

The run's Python has no unbabel-comet (its pins exclude it); `environments: {comet: ...}`
names the Python of the environment that has it (.venv-comet, see the Makefile), which the
COMET family's score jobs hand their work to. Tiny random checkpoints of the three shapes are
built in that environment (tests/comet_checkpoints.py); that the scores equal unbabel-comet's
own `comet-score` is tests/test_comet.py's.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from .conftest import REPOSITORY, SAMPLE, Workflow
from .test_command import command
from .test_metric_records import planned_rules
from .workflow_configs import bounds_config

COMET_PYTHON = REPOSITORY / ".venv-comet" / "bin" / "python"
DIRECTIONS = ["eng_Latn-fra_Latn", "eng_Latn-cmn_Hans"]

if not COMET_PYTHON.exists():
    pytest.skip(
        f"{COMET_PYTHON} does not exist: these tests need COMET's environment (the Makefile's "
        ".venv-comet, from envs/comet-requirements.txt)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("comet")
    build = (
        "import json, sys; from pathlib import Path; from tests.comet_checkpoints import "
        "build_all; print(json.dumps({k: str(v) for k, v in build_all(Path(sys.argv[1])).items()}))"
    )
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    built = subprocess.run(
        [str(COMET_PYTHON), "-c", build, str(folder)],
        cwd=REPOSITORY,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(built.stdout.strip().splitlines()[-1])


def test_comet_family_added_to_a_finished_run(
    workflow: Workflow, checkpoints: dict[str, str]
) -> None:
    """chrF++ first; then the COMET family: only its jobs run, in its own environment, one
    model load per metric, and every direction's scored file holds all the columns."""
    base = bounds_config(SAMPLE, shards=1, directions={"list": DIRECTIONS})
    base["models"] = base["models"][:1]
    comet = {
        name: {"model": checkpoints[name], "device": "cpu", "batch_size": 8}
        for name in ("comet", "cometkiwi", "xcomet")
    }
    environments = {"comet": str(COMET_PYTHON)}
    workflow.write_config({**base, "metrics": ["chrf"]})
    workflow.run()
    folder = workflow.workdir / "runs" / "copy-source"
    chrf = folder / "by-metric" / "chrf" / f"{DIRECTIONS[0]}.parquet"
    written = chrf.stat().st_mtime_ns

    metrics = ["chrf", "comet", "cometkiwi", "xcomet"]
    workflow.write_config({**base, "metrics": metrics, "environments": environments, **comet})
    planned = planned_rules(workflow)
    assert "score_comet_cpu" in planned and "score" in planned
    assert not {"score_workflow_cpu", "translate"} & planned, planned
    workflow.run(env={"HF_HUB_OFFLINE": "1"})
    assert chrf.stat().st_mtime_ns == written

    log = workflow.workdir / "logs" / "copy-source" / "score" / "comet_cpu" / "shard0of1.log"
    text = log.read_text()
    assert f"scoring comet, cometkiwi, xcomet in {COMET_PYTHON}" in text
    assert sum(f"{name}: loading" in text for name in ("comet", "cometkiwi", "xcomet")) == 3
    for direction in DIRECTIONS:
        scored = pd.read_parquet(folder / f"{direction}.scored.parquet")
        assert {"chrfpp", "comet", "cometkiwi", "xcomet", "xcomet_error_spans"} <= set(scored)
        for column in ("comet", "cometkiwi", "xcomet"):
            assert all(math.isfinite(value) for value in scored[column]), column
        for spans, translation in zip(scored["xcomet_error_spans"], scored["mt_text"], strict=True):
            for span in json.loads(spans):
                assert 0 <= span["start"] <= span["end"] <= len(translation)
                assert span["severity"] in ("minor", "major", "critical")
    scores = pd.read_csv(folder / "scores.csv")
    assert {"comet", "cometkiwi", "xcomet", "unseen_by"} <= set(scores.columns)
    assert "xcomet_error_spans" not in scores.columns
    manifest = json.loads((folder / "manifest.json").read_text())
    signatures = manifest["entries"][-1]["metrics"]
    assert signatures["comet"].startswith(f"model:{checkpoints['comet']}|commit:local")


def test_bouquet_eval_score_with_comet(tmp_path: Path, checkpoints: dict[str, str]) -> None:
    """`bouquet-eval score --metrics chrf,comet` on translations brought by the user, with
    COMET's settings and environment given to Snakemake as `--config` items."""
    folder = tmp_path / "runs" / "mine"
    folder.mkdir(parents=True)
    for name in DIRECTIONS:
        rows = pd.read_parquet(SAMPLE / f"{name}.parquet").rename(columns={"tgt_text": "ref_text"})
        rows["mt_text"] = rows["src_text"]
        columns = ["src_lang", "tgt_lang", "src_text", "ref_text", "mt_text"]
        rows[columns].to_json(folder / f"{name}.jsonl", orient="records", lines=True)
    comet = json.dumps({"model": checkpoints["comet"], "device": "cpu"})
    command(
        tmp_path, "score", "--output-dir", "runs/mine/", "--metrics", "chrf,comet",
        "--dataset-path", str(SAMPLE), "--cores", "2",
        "--", "--config", f"comet={comet}", f'environments={{"comet": "{COMET_PYTHON}"}}',
        check=True, env={"HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    scores = pd.read_csv(folder / "scores.csv")
    assert len(scores) == 2 and {"chrfpp", "comet"} <= set(scores.columns)
    assert scores["comet"].notna().all()
