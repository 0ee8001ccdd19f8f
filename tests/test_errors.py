"""Bad input gets one clear error naming what is wrong, and nothing half-written."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from .conftest import Workflow
from .workflow_configs import bounds_config, recording_model


def failure_text(workflow: Workflow) -> str:
    result = workflow.run(check=False)
    assert result.returncode != 0
    return result.stdout + result.stderr


def test_missing_dataset_path(workflow: Workflow, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    workflow.write_config(bounds_config(missing))
    assert f"dataset.path: directory '{missing}' not found" in failure_text(workflow)


def test_dataset_path_that_is_a_file(workflow: Workflow, tmp_path: Path) -> None:
    a_file = tmp_path / "bouquet.parquet"
    a_file.write_bytes(b"PAR1")
    workflow.write_config(bounds_config(a_file))
    assert (
        f"bouquet-eval: {workflow.config_path}: dataset.path: '{a_file}' is a file, not a folder\n"
    ) in failure_text(workflow)


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
        f"bouquet-eval: {workflow.config_path}: directions (directions.list): "
        "'eng_Latn-xyz_Latn': no direction of the dataset has language code(s) ['xyz_Latn']\n"
    ) in text


def with_row(position: int, column: str, value: object | None = None):
    """A damage for `dataset_failure`: the value of `column` at 0-based `position` replaced by
    `value`, or by the first row's value (a repeat)."""

    def damage(path: Path) -> None:
        frame = pd.read_parquet(path)
        frame.loc[position, column] = frame.loc[0, column] if value is None else value
        frame.to_parquet(path)

    return damage


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
            ": missing column(s) src_text",
        ),
        (
            lambda path: pd.read_parquet(path).head(0).to_parquet(path),
            ": no sentences (0 rows); remove the file or fix it",
        ),
        (
            lambda path: pd.read_parquet(path).assign(src_text=range(24)).to_parquet(path),
            ": column src_text holds int64, not text",
        ),
        (
            lambda path: path.write_text("src_lang,tgt_lang\neng_Latn,fra_Latn\n"),
            ": not a readable parquet file",
        ),
        (with_row(3, "src_text", pd.NA), ", row 4: src_text is missing"),
        (with_row(3, "tgt_text", pd.NA), ", row 4: tgt_text is missing"),
        (
            with_row(3, "uniq_id"),
            ", row 4: uniq_id 'sample-001' appears more than once in the direction (also at row 1)",
        ),
        (
            with_row(5, "src_lang", "deu_Latn"),
            ", row 6: src_lang is 'deu_Latn', expected 'eng_Latn' from the file name",
        ),
        (
            with_row(5, "tgt_lang", "deu_Latn"),
            ", row 6: tgt_lang is 'deu_Latn', expected 'fra_Latn' from the file name",
        ),
    ],
)
def test_bad_dataset_files_stop_the_run_before_anything_runs(
    workflow: Workflow, dataset: Path, damage, message: str
) -> None:
    broken, text = dataset_failure(workflow, dataset, damage)
    assert f"bouquet-eval: dataset file {broken}{message}" in text
    assert "translator" not in text


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
    # Found while planning: no job is started to find it.
    assert (
        f"bouquet-eval: {workflow.config_path}: models[0].translator (model 'x'): module "
        "'recording' has no attribute 'NoSuchTranslator'\n"
    ) in failure_text(workflow)
    assert not (workflow.workdir / "logs").exists()


def test_metric_of_ones_own_without_a_name_stops_the_run_before_anything_runs(
    workflow: Workflow, dataset: Path
) -> None:
    workflow.write_config(bounds_config(dataset, metrics=["chrf", "faults:NamelessMetric"]))
    text = failure_text(workflow)
    assert (
        "bouquet-eval: metric 'faults:NamelessMetric': NamelessMetric has no name; a metric "
        "needs `name`, `columns`"
    ) in text
    assert not (workflow.workdir / "runs").exists()


def test_rows_are_read_once_per_file_state(workflow: Workflow, dataset: Path) -> None:
    """A plan trusts what a run checked while a file's size and modification time are the
    same, and checks the file again once they change (a dry run remembers nothing)."""
    path = dataset / "eng_Latn-fra_Latn.parquet"
    frame = pd.read_parquet(path)
    # Uncompressed and without dictionaries, a same-length value keeps the file's size.
    plain = {"compression": None, "use_dictionary": False}
    frame.to_parquet(path, **plain)
    workflow.write_config(bounds_config(dataset, shards=1))
    workflow.run("translations")
    before = path.stat()
    frame.loc[5, "tgt_lang"] = "deu_Latn"
    frame.to_parquet(path, **plain)
    assert path.stat().st_size == before.st_size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    workflow.run("--dry-run")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1))
    text = failure_text(workflow)
    assert f"dataset file {path}, row 6: tgt_lang is 'deu_Latn', expected 'fra_Latn'" in text


def test_uniq_id_of_another_type_than_in_the_other_files(workflow: Workflow, dataset: Path) -> None:
    broken, text = dataset_failure(
        workflow,
        dataset,
        lambda path: pd.read_parquet(path).assign(uniq_id=range(24)).to_parquet(path),
    )
    others = len(list(dataset.glob("*.parquet"))) - 1
    assert (
        f"bouquet-eval: dataset file {broken}: column uniq_id holds integers, but text in the "
        f"other {others} selected file(s), such as {dataset / 'arb_Arab-eng_Latn.parquet'}; all "
        "files must give uniq_id one type\n"
    ) in text


@pytest.mark.parametrize(
    ("output_dir", "a_file", "message"),
    [
        ("afile/sub", "afile", "output_dir 'afile/sub': 'afile' is a file, not a folder"),
        (
            "runs",
            "runs/copy-source",
            "model 'copy-source': folder 'runs/copy-source' is a file, not a folder",
        ),
    ],
)
def test_folders_that_are_files(
    workflow: Workflow, dataset: Path, output_dir: str, a_file: str, message: str
) -> None:
    path = workflow.workdir / a_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a folder\n")
    workflow.write_config(bounds_config(dataset, output_dir=output_dir))
    text = failure_text(workflow)
    assert f"bouquet-eval: {message}\n" in text
    assert "Traceback" not in text
    written = [p for p in workflow.workdir.rglob("*") if ".snakemake" not in p.parts]
    assert sorted(written) == sorted({path, path.parent, workflow.config_path} - {workflow.workdir})


def test_provided_translations_from_a_folder_that_does_not_exist(
    workflow: Workflow, dataset: Path
) -> None:
    models = [{"name": "mine", "translator": "provided", "path": "elsewhere/mine"}]
    workflow.write_config(bounds_config(dataset, models=models))
    assert (
        f"bouquet-eval: {workflow.config_path}: model 'mine' (translator: provided): folder "
        "'elsewhere/mine' not found\n"
    ) in failure_text(workflow)
