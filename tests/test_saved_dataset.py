"""BOUQuET saved by `datasets`' save_to_disk, given as dataset.path: read through `datasets`,
laid out once per direction, and scored as the parquet files it came from."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from bouquet_eval.core.config import ConfigError
from bouquet_eval.data.dataset import prepare_dataset, resolve_dataset

from .conftest import SAMPLE, Workflow
from .sample_forms import save_sample
from .workflow_configs import SAMPLE_DIRECTIONS, SMALL_JOBS

# `datasets` is in the main environment ([saved] extra); the vLLM and COMET environments, whose
# runs select none of these tests, still collect this module.
datasets = pytest.importorskip("datasets")


@pytest.mark.parametrize("as_dict", [False, True], ids=["Dataset", "DatasetDict"])
def test_a_saved_dataset_reads_as_its_parquet_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_dict: bool
) -> None:
    saved = tmp_path / "bouquet"
    save_sample(saved, as_dict)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(Exception, match="has not been laid out"):
        resolve_dataset({"path": str(saved)}, fetch=False)
    # As the workflow plans while Snakemake parses it: the directions, nothing written.
    planned = resolve_dataset({"path": str(saved), "split": "test"}, prepare=False)
    assert planned.directions() == SAMPLE_DIRECTIONS
    assert not (tmp_path / ".snakemake").exists()
    # Laid out once Snakemake plans the run.
    prepare_dataset(planned)
    source = resolve_dataset({"path": str(saved), "split": "test"}, fetch=True)
    assert source.root == planned.root and source.listed is None
    assert source.identity["saved_by"] == "datasets" and source.identity["fingerprint"]
    assert source.root.is_relative_to(tmp_path / ".snakemake" / "bouquet-eval")
    assert source.directions() == SAMPLE_DIRECTIONS
    original = resolve_dataset({"path": str(SAMPLE)})
    for direction in SAMPLE_DIRECTIONS:
        pd.testing.assert_frame_equal(source.load(direction), original.load(direction))
    # Jobs read the layout their main process wrote.
    assert resolve_dataset({"path": str(saved)}, fetch=False).root == source.root


def test_a_table_saved_again_after_planning_is_not_laid_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = tmp_path / "bouquet"
    save_sample(saved)
    monkeypatch.chdir(tmp_path)
    planned = resolve_dataset({"path": str(saved)}, prepare=False)
    # Another table in the folder: one direction of the sample.
    shutil.rmtree(saved)
    one = pd.read_parquet(SAMPLE / "eng_Latn-fra_Latn.parquet")
    datasets.Dataset.from_pandas(one, preserve_index=False).save_to_disk(str(saved))
    with pytest.raises(ConfigError, match="was saved again while the run was planned"):
        prepare_dataset(planned)
    assert not planned.root.exists()


def test_the_workflow_scores_a_saved_dataset(workflow: Workflow, tmp_path: Path) -> None:
    saved = tmp_path / "bouquet"
    save_sample(saved)
    directions = ["eng_Latn-fra_Latn", "fra_Latn-eng_Latn"]
    config = {
        "directions": {"list": directions},
        "limit": 4,
        "resources": SMALL_JOBS,
        "models": [{"name": "reference", "translator": "reference"}],
    }
    workflow.write_config({**config, "dataset": {"path": str(saved)}})
    workflow.run("aggregates")
    scores = pd.read_csv(workflow.workdir / "runs" / "reference" / "scores.csv")
    assert len(scores) == 2 and (scores["chrfpp"] == 100).all()
    assert (scores["n_sentences"] == 4).all()
