"""Bad input gets one clear error naming what is wrong, and nothing half-written."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .conftest import Workflow
from .test_workflow import bounds_config, recording_model


def failure_text(workflow: Workflow) -> str:
    result = workflow.run(check=False)
    assert result.returncode != 0
    return result.stdout + result.stderr


def test_missing_dataset_path(workflow: Workflow, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    workflow.write_config(bounds_config(missing))
    assert f"dataset.path: directory '{missing}' not found" in failure_text(workflow)


def test_unknown_configuration_key(workflow: Workflow, dataset: Path) -> None:
    config = bounds_config(dataset)
    config["models"][0]["temprature"] = 0
    workflow.write_config(config)
    text = failure_text(workflow)
    assert "invalid configuration at 'models[0]': 'temprature' is not one of" in text


def test_wrong_type(workflow: Workflow, dataset: Path) -> None:
    workflow.write_config(bounds_config(dataset, limit="ten"))
    assert "invalid configuration at 'limit': 'ten' is not of type" in failure_text(workflow)


def test_unknown_language_in_direction_list(workflow: Workflow, dataset: Path) -> None:
    workflow.write_config(bounds_config(dataset, directions={"list": ["eng_Latn-xyz_Latn"]}))
    text = failure_text(workflow)
    assert "directions.list: 'eng_Latn-xyz_Latn': unknown language code(s) ['xyz_Latn']" in text


def test_parquet_without_source_text(workflow: Workflow, dataset: Path) -> None:
    broken = dataset / "eng_Latn-fra_Latn.parquet"
    pd.read_parquet(broken).drop(columns=["src_text"]).to_parquet(broken)
    workflow.write_config(bounds_config(dataset, shards=1))
    failure_text(workflow)
    logs = "".join(p.read_text() for p in (workflow.workdir / "logs").rglob("shard0of1.log"))
    assert f"dataset file {broken}: missing column(s) src_text" in logs
    assert not list((workflow.workdir / "runs").rglob("eng_Latn-fra_Latn.jsonl"))


def test_wrong_number_of_outputs(workflow: Workflow, dataset: Path) -> None:
    record = workflow.workdir / "record.txt"
    workflow.write_config(
        bounds_config(
            dataset,
            directions={"list": ["eng_Latn-deu_Latn"]},
            models=[recording_model("rec", record, drop_one=True)],
        )
    )
    failure_text(workflow)
    logs = "".join(p.read_text() for p in (workflow.workdir / "logs" / "rec").rglob("*.log"))
    assert (
        "direction eng_Latn-deu_Latn: the translator returned 23 outputs for 24 sentences" in logs
    )
    folder = workflow.workdir / "runs" / "rec"
    assert not list(folder.glob("*.jsonl"))
    assert not list(folder.glob(".cache/*/*"))


def test_translator_that_cannot_be_imported(workflow: Workflow, dataset: Path) -> None:
    workflow.write_config(
        bounds_config(
            dataset,
            directions={"list": ["eng_Latn-deu_Latn"]},
            models=[{"name": "x", "translator": "recording:NoSuchTranslator"}],
        )
    )
    failure_text(workflow)
    log = next((workflow.workdir / "logs" / "x" / "translate").glob("*.log")).read_text()
    assert "module 'recording' has no attribute 'NoSuchTranslator'" in log
