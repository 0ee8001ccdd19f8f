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
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from bouquet_eval.metrics.records import RECORDS

from .conftest import REPOSITORY, SAMPLE, Workflow, built_in, environment_python
from .debian import install
from .test_command import command
from .test_metric_records import planned_rules
from .test_slurm import MODULES_INIT, MODULES_PACKAGES, full_log
from .workflow_configs import bounds_config

COMET_PYTHON = environment_python("COMET", "comet")
DIRECTIONS = ["eng_Latn-fra_Latn", "eng_Latn-cmn_Hans"]
MODULE = "bouquet-eval-comet"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("comet")
    return built_in(COMET_PYTHON, "tests.comet_checkpoints", folder)


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
    """`bouquet-eval score --metrics chrf,comet,xcomet` on translations brought by the user:
    the checkpoints and COMET's Python given as paths relative to where the command is typed,
    in its flags and in `--config` items after `--`; without the environment, the run stops
    before any job, naming the flag to add."""
    folder = tmp_path / "runs" / "mine"
    folder.mkdir(parents=True)
    for name in DIRECTIONS:
        rows = pd.read_parquet(SAMPLE / f"{name}.parquet").rename(columns={"tgt_text": "ref_text"})
        rows["mt_text"] = rows["src_text"]
        columns = ["src_lang", "tgt_lang", "src_text", "ref_text", "mt_text"]
        rows[columns].to_json(folder / f"{name}.jsonl", orient="records", lines=True)
    for name in ("comet", "xcomet"):
        shutil.copytree(checkpoints[name], tmp_path / name)
    venv = os.path.relpath(COMET_PYTHON, tmp_path)
    flags = ("score", "--output-dir", "runs/mine/", "--metrics", "chrf,comet,xcomet",
             "--comet-model", "comet", "--comet-device", "cpu", "--xcomet-device", "cpu",
             "--dataset-path", str(SAMPLE), "--cores", "2")  # fmt: skip
    refused = command(tmp_path, *flags, env={"HF_HUB_OFFLINE": "1"})
    assert refused.returncode == 1 and "--environment comet=PYTHON" in refused.stderr
    assert not list(folder.glob("*.scored.parquet"))
    command(
        tmp_path, *flags, "--environment", f"comet={venv}",
        "--", "--config", "xcomet={model: ./xcomet, batch_size: 4}",
        check=True, env={"HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    scores = pd.read_csv(folder / "scores.csv")
    assert len(scores) == 2 and {"chrfpp", "comet", "xcomet"} <= set(scores.columns)
    assert scores["comet"].notna().all() and scores["xcomet"].notna().all()
    signatures = json.loads((folder / "manifest.json").read_text())["entries"][-1]["metrics"]
    assert signatures["comet"].startswith(f"model:{tmp_path / 'comet'}|commit:local")
    assert signatures["xcomet"].startswith(f"model:{tmp_path / 'xcomet'}|commit:local")


def test_a_received_submission_with_comet_scores_is_verified(
    workflow: Workflow, checkpoints: dict[str, str], tmp_path: Path
) -> None:
    """A maintainer's `snakemake verify` of received submissions carrying chrF++ and COMET-22
    scores, the verify job handing its rescoring to COMET's environment: the honest claim (as
    the archive `snakemake submission` wrote) and one off by less than COMET's tolerance (its
    record's) pass; one inflated by more fails, naming the value."""
    config = {
        **bounds_config(SAMPLE, shards=1, directions={"list": DIRECTIONS}, limit=12),
        "metrics": ["chrf", "comet"],
        "comet": {"model": checkpoints["comet"], "device": "cpu", "batch_size": 8},
        "environments": {"comet": str(COMET_PYTHON)},
        "statistics": {"bootstrap_resamples": 50, "ar_trials": 50},
    }
    config["models"] = config["models"][:1]
    workflow.write_config(config)
    offline = {"HF_HUB_OFFLINE": "1"}
    workflow.run("submission", env=offline)
    submitted = workflow.workdir / "runs" / "submission" / "copy-source"

    tolerance = RECORDS["comet"].tolerances["comet"]
    inbox = tmp_path / "inbox"
    for name, added in {"within": 0.5 * tolerance, "inflated": 2 * tolerance}.items():
        copy = shutil.copytree(submitted, inbox / name)
        scores = pd.read_csv(copy / "scores.csv")
        scores.loc[scores["tgt_lang"] == "fra_Latn", "comet"] += added
        scores.to_csv(copy / "scores.csv", index=False)

    maintainer = Workflow(tmp_path / "maintainer")
    maintainer.workdir.mkdir()
    maintainer.write_config({**config, "models": [{"name": "baseline", "translator": "reference"}]})
    listed = ", ".join(map(str, [f"{submitted}.tar.gz", inbox / "within", inbox / "inflated"]))
    failed = maintainer.run(
        "verify", "--keep-going", "--config", f"submissions=[{listed}]", check=False, env=offline
    )
    assert failed.returncode != 0
    log = maintainer.workdir / "logs" / "received" / "copy-source" / "verify.log"
    assert f"rescoring with chrf, comet in {COMET_PYTHON}" in log.read_text()
    received = maintainer.workdir / "runs" / "received"
    for name in ("copy-source", "within"):
        verification = pd.read_csv(received / name / "verification.csv")
        assert set(verification["status"]) == {"ok"}, verification
        assert {"n_sentences", "chrfpp", "chrfpp_corpus", "comet"} == set(verification["metric"])
        assert set(verification.loc[verification["metric"] == "comet", "tolerance"]) == {tolerance}
    verification = pd.read_csv(received / "inflated" / "verification.csv")
    differs = verification[verification["status"] == "differs"]
    assert list(zip(differs["tgt_lang"], differs["metric"], strict=True)) == [("fra_Latn", "comet")]
    (row,) = differs.itertuples(index=False)
    assert row.difference == pytest.approx(-2 * tolerance)
    assert (
        f"model 'inflated', direction eng_Latn-fra_Latn, comet: claimed {row.claimed!r}, "
        f"recomputed {row.recomputed!r} (tolerance {tolerance:g})"
    ) in failed.stdout + failed.stderr


@pytest.fixture
def comet_module(tmp_path: Path) -> dict[str, str]:
    """envs/modulefiles/bouquet-eval-comet with .venv-comet filled in, and what Snakemake's
    environment needs to load it in jobs (as in tests/test_slurm.py's vLLM module)."""
    try:
        install(MODULES_PACKAGES)
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"Environment Modules cannot be installed here: {error}")
    template = (REPOSITORY / "envs" / "modulefiles" / "bouquet-eval-comet").read_text()
    folder = tmp_path / "modulefiles"
    folder.mkdir()
    venv = COMET_PYTHON.parent.parent
    module = re.sub(r"(?m)^set venv .*$", f"set venv {venv}", template)
    (folder / "bouquet-eval-comet").write_text(module)
    return {"MODULEPATH": str(folder), "BASH_ENV": str(MODULES_INIT)}


def test_comet_jobs_and_verify_load_its_module(
    workflow: Workflow, checkpoints: dict[str, str], comet_module: dict[str, str]
) -> None:
    """With `--sdm env-modules` and no `environments`, the COMET family's score jobs and the
    verify job load the module that `resources.score_comet_cpu.envmodules` names, and run in
    its Python (the workflow's own has no unbabel-comet); the claim verifies."""
    config = {
        **bounds_config(SAMPLE, shards=1, directions={"list": DIRECTIONS[:1]}, limit=12),
        "metrics": ["chrf", "comet"],
        "comet": {"model": checkpoints["comet"], "device": "cpu", "batch_size": 8},
        "statistics": {"bootstrap_resamples": 50, "ar_trials": 50},
    }
    config["models"] = config["models"][:1]
    config["resources"] = {**config["resources"], "score_comet_cpu": {"envmodules": [MODULE]}}
    workflow.write_config(config)
    environment = {**comet_module, "HF_HUB_OFFLINE": "1"}
    for target in ("all", "verify"):
        run = workflow.run(target, "--sdm", "env-modules", env=environment)
        log = full_log(workflow.workdir, run.stderr)
        assert f"Activating environment modules: {MODULE}" in log, target
    verification = pd.read_csv(workflow.workdir / "runs" / "copy-source" / "verification.csv")
    assert "comet" in set(verification["metric"]) and set(verification["status"]) == {"ok"}
