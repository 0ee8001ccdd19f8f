"""Bad input gets one clear error naming what is wrong, and nothing half-written."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

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
    assert (
        "directions (directions.list): 'eng_Latn-xyz_Latn': unknown language code(s) ['xyz_Latn']"
        in text
    )


def dataset_failure(workflow: Workflow, dataset: Path, damage) -> tuple[Path, str]:
    """A run on a dataset with one file damaged: the error, and that nothing ran."""
    broken = dataset / "eng_Latn-fra_Latn.parquet"
    damage(broken)
    workflow.write_config(bounds_config(dataset, shards=1))
    text = failure_text(workflow)
    assert not (workflow.workdir / "runs").exists()
    assert not (workflow.workdir / "logs").exists()
    return broken, text


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda path: pd.read_parquet(path).drop(columns=["src_text"]).to_parquet(path),
            "missing column(s) src_text",
        ),
        (
            lambda path: pd.read_parquet(path).head(0).to_parquet(path),
            "no sentences (0 rows); remove the file or fix it",
        ),
        (
            lambda path: pd.read_parquet(path).assign(src_text=range(24)).to_parquet(path),
            "column src_text holds int64, not text",
        ),
        (
            lambda path: path.write_text("src_lang,tgt_lang\neng_Latn,fra_Latn\n"),
            "not a readable parquet file",
        ),
    ],
)
def test_bad_dataset_files_stop_the_run_before_anything_runs(
    workflow: Workflow, dataset: Path, damage, message: str
) -> None:
    broken, text = dataset_failure(workflow, dataset, damage)
    assert f"bouquet-eval: dataset file {broken}: {message}" in text


def test_duplicate_sentence_ids_are_refused(workflow: Workflow, dataset: Path) -> None:
    broken = dataset / "eng_Latn-fra_Latn.parquet"
    frame = pd.read_parquet(broken)
    frame.loc[3, "uniq_id"] = frame.loc[1, "uniq_id"]
    frame.to_parquet(broken)
    workflow.write_config(bounds_config(dataset, shards=1))
    failure_text(workflow)
    logs = "".join(p.read_text() for p in (workflow.workdir / "logs").rglob("shard0of1.log"))
    assert (
        f"dataset file {broken}, row 3: uniq_id {frame.loc[1, 'uniq_id']!r} appears more than "
        "once in the direction" in logs
    )
    assert not list((workflow.workdir / "runs").rglob("eng_Latn-fra_Latn.jsonl"))


def test_output_dir_that_is_a_file(workflow: Workflow, dataset: Path) -> None:
    (workflow.workdir / "results").write_text("not a folder\n")
    workflow.write_config(bounds_config(dataset, output_dir="results"))
    assert "bouquet-eval: output_dir 'results' is a file, not a folder" in failure_text(workflow)


def test_model_names_that_would_share_job_names(workflow: Workflow, dataset: Path) -> None:
    models = [
        {"name": "m-1", "translator": "copy-source"},
        {"name": "m_1", "translator": "reference"},
    ]
    workflow.write_config(bounds_config(dataset, models=models))
    text = failure_text(workflow)
    assert (
        "invalid configuration at 'models': model names ['m-1', 'm_1'] differ only in characters "
        "other than letters and digits, so their jobs would share the name 'm_1'; rename one"
    ) in text


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


def test_metric_of_ones_own_without_a_name_stops_the_run_before_anything_runs(
    workflow: Workflow, dataset: Path
) -> None:
    workflow.write_config(bounds_config(dataset, metrics=["chrf", "faults:NamelessMetric"]))
    text = failure_text(workflow)
    assert (
        "metric 'faults:NamelessMetric': NamelessMetric has no name; a metric needs `name`, "
        "`columns`"
    ) in text
    assert not (workflow.workdir / "runs").exists()
