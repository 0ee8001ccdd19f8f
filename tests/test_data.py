from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from bouquet_eval.config import ConfigError
from bouquet_eval.data import (
    DatasetSource,
    Direction,
    as_direction,
    resolve_dataset,
    select_directions,
)

from .conftest import REPOSITORY, SAMPLE


def test_direction_parsing() -> None:
    direction = Direction.parse("eng_Latn-por_Latn_braz1246")
    assert (direction.src_lang, direction.tgt_lang) == ("eng_Latn", "por_Latn_braz1246")
    assert str(direction) == "eng_Latn-por_Latn_braz1246"
    for bad in ("eng-fra", "eng_Latn_fra_Latn", "eng_Latn-fra_Latn-deu_Latn", "eng_latn-fra_Latn"):
        with pytest.raises(ValueError, match="is not a direction"):
            Direction.parse(bad)


def test_bundled_sample_is_benchmark_shaped() -> None:
    source = resolve_dataset({"path": str(SAMPLE)})
    directions = source.directions()
    languages = {d.src_lang for d in directions} | {d.tgt_lang for d in directions}
    assert len(directions) >= 12 and len(languages) >= 8
    assert {"arb_Arab", "cmn_Hans", "hin_Deva", "por_Latn_braz1246"} <= languages
    texts = []
    for direction in directions:
        frame = source.load(direction)
        assert len(frame) >= 20
        texts += frame["src_text"].tolist()
    assert any("\n" in text for text in texts)
    assert any("🎉" in text for text in texts)


def test_bundled_parquet_matches_its_source(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPOSITORY / "data" / "sample"))
    try:
        import build
    finally:
        sys.path.pop(0)
    rebuilt = build.build(REPOSITORY / "data" / "sample" / "sentences.yaml", tmp_path)
    assert sorted(p.name for p in rebuilt) == sorted(p.name for p in SAMPLE.glob("*.parquet"))
    for path in rebuilt:
        assert pq.read_table(path).equals(pq.read_table(SAMPLE / path.name)), path.name


def test_selection(dataset: Path) -> None:
    available = DatasetSource(dataset, {}).directions()
    assert select_directions(available) == available
    into_english = select_directions(available, tgt_filter=["eng_Latn"])
    assert into_english and all(d.tgt_lang == "eng_Latn" for d in into_english)
    expected = [Direction("eng_Latn", "fra_Latn"), Direction("fra_Latn", "deu_Latn")]
    assert select_directions(available, directions=["fra_Latn-deu_Latn", "eng_Latn-fra_Latn"]) == (
        expected
    )
    # Pairs as well as names; the filters apply to an explicit list.
    pairs = [("fra_Latn", "deu_Latn"), ("eng_Latn", "fra_Latn"), ("eng_Latn", "deu_Latn")]
    assert select_directions(available, directions=pairs, tgt_filter=["fra_Latn", "deu_Latn"]) == [
        Direction("eng_Latn", "deu_Latn"),
        *expected,
    ]
    assert select_directions(available, directions=pairs, src_filter=["fra_Latn"]) == expected[1:]
    with pytest.raises(
        ConfigError, match=r"tgt_filter \(directions.tgt_langs\): unknown language code\(s\) "
    ):
        select_directions(available, tgt_filter=["zul_Latn"])
    with pytest.raises(ConfigError, match="'deu_Latn-fra_Latn': not in the dataset"):
        select_directions(available, directions=["deu_Latn-fra_Latn"])
    with pytest.raises(ConfigError, match="the selection holds no direction"):
        select_directions(available, src_filter=["hin_Deva"], tgt_filter=["fra_Latn"])


def test_selection_as_the_seed_calls_it(dataset: Path) -> None:
    """`select_directions(src_filter=..., dataset=...)` reads the dataset's directions itself."""
    chosen = select_directions(src_filter=["eng_Latn"], tgt_filter=["fra_Latn"], dataset=dataset)
    assert chosen == [Direction("eng_Latn", "fra_Latn")]
    section = {"path": str(dataset)}
    assert select_directions(directions=[("eng_Latn", "fra_Latn")], dataset=section) == chosen
    assert as_direction(("eng_Latn", "por_Latn_braz1246")) == Direction.parse(
        "eng_Latn-por_Latn_braz1246"
    )


def test_load_checks_the_file(dataset: Path) -> None:
    source = DatasetSource(dataset, {})
    direction = Direction("eng_Latn", "fra_Latn")
    assert len(source.load(direction, limit=3)) == 3
    path = dataset / "eng_Latn-fra_Latn.parquet"
    original = pd.read_parquet(path)
    frame = original.copy()
    frame.loc[5, "tgt_lang"] = "deu_Latn"
    frame.to_parquet(path)
    # The whole file is checked, also when only its first sentences are evaluated.
    for limit in (None, 5):
        with pytest.raises(ValueError, match=r"row 5: tgt_lang is 'deu_Latn', expected 'fra_Latn'"):
            source.load(direction, limit=limit)
    frame = original.copy()
    frame.loc[7, "uniq_id"] = frame.loc[2, "uniq_id"]
    frame.to_parquet(path)
    with pytest.raises(ValueError, match=rf"{path}, row 7: uniq_id '.+' appears more than once"):
        source.load(direction)
    with pytest.raises(FileNotFoundError, match="eng_Latn-zul_Latn"):
        source.load(Direction("eng_Latn", "zul_Latn"))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda path: path.write_bytes(b"not parquet at all"), "not a readable parquet file"),
        (lambda path: path.write_bytes(path.read_bytes()[:200]), "not a readable parquet file"),
        (
            lambda path: pd.read_parquet(path).head(0).to_parquet(path),
            r"no sentences \(0 rows\)",
        ),
        (
            lambda path: pd.read_parquet(path).assign(src_text=range(24)).to_parquet(path),
            "column src_text holds int64, not text",
        ),
        (
            lambda path: pd.read_parquet(path).drop(columns="uniq_id").to_parquet(path),
            "missing column",
        ),
    ],
)
def test_dataset_files_are_checked_before_anything_runs(dataset: Path, damage, message) -> None:
    source = DatasetSource(dataset, {})
    directions = source.directions()
    path = dataset / "eng_Latn-fra_Latn.parquet"
    damage(path)
    with pytest.raises(ConfigError, match=rf"dataset file {path}: {message}"):
        source.check_files(directions)
    with pytest.raises(ValueError, match=rf"dataset file {path}: {message}"):
        source.load(Direction("eng_Latn", "fra_Latn"))


def test_checked_files_are_remembered_until_they_change(dataset: Path, tmp_path: Path) -> None:
    source = DatasetSource(dataset, {})
    directions = source.directions()
    index = tmp_path / "index.json"
    source.check_files(directions, index)
    assert len(json.loads(index.read_text())) == len(directions)
    path = dataset / "eng_Latn-fra_Latn.parquet"
    pd.read_parquet(path).head(0).to_parquet(path)
    with pytest.raises(ConfigError, match="no sentences"):
        source.check_files(directions, index)


def test_stray_file_names_are_reported(dataset: Path) -> None:
    (dataset / "notes.parquet").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"notes.parquet: 'notes' is not a direction"):
        DatasetSource(dataset, {}).directions()


def test_hub_snapshot_from_the_offline_cache(dataset: Path, tmp_path: Path) -> None:
    """The hub path, offline: a Hugging Face cache laid out as a download leaves it.

    In a subprocess, because huggingface_hub reads HF_HOME once, when first imported.
    """
    commit = "0123456789abcdef0123456789abcdef01234567"
    repository = tmp_path / "hf" / "hub" / "datasets--facebook--bouquet"
    folder = repository / "snapshots" / commit / "benchmark_data" / "sentence_level" / "test"
    folder.mkdir(parents=True)
    for path in dataset.glob("*.parquet"):
        (folder / path.name).write_bytes(path.read_bytes())
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text(commit)
    script = textwrap.dedent(
        """
        import json, sys
        from bouquet_eval.config import ConfigError
        from bouquet_eval.data import resolve_dataset

        settings = {"name": "facebook/bouquet", "config": "benchmark_sentence_level",
                    "split": "test", "revision": "main", "path": None}
        source = resolve_dataset(settings)
        try:
            resolve_dataset({**settings, "split": "dev", "revision": "v2"})
            missing = None
        except ConfigError as error:
            missing = str(error)
        print(json.dumps({"root": str(source.root), "identity": source.identity,
                          "directions": len(source.directions()), "missing": missing}))
        """
    )
    environment = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["root"] == str(folder)
    assert found["identity"]["commit"] == commit
    assert found["directions"] == len(list(dataset.glob("*.parquet")))
    assert "not in the Hugging Face cache and HF_HUB_OFFLINE" in found["missing"]
