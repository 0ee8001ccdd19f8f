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
    resolve_dataset,
    select_directions,
    sentences_digest,
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
    into_english = select_directions(available, tgt_langs=["eng_Latn"])
    assert into_english and all(d.tgt_lang == "eng_Latn" for d in into_english)
    assert select_directions(available, names=["fra_Latn-deu_Latn", "eng_Latn-fra_Latn"]) == [
        Direction("eng_Latn", "fra_Latn"),
        Direction("fra_Latn", "deu_Latn"),
    ]
    with pytest.raises(
        ConfigError, match=r"directions.tgt_langs: unknown language code\(s\) \['zul_Latn'\]"
    ):
        select_directions(available, tgt_langs=["zul_Latn"])
    with pytest.raises(ConfigError, match="'deu_Latn-fra_Latn': not in the dataset"):
        select_directions(available, names=["deu_Latn-fra_Latn"])
    with pytest.raises(ConfigError, match="cannot be combined"):
        select_directions(available, src_langs=["eng_Latn"], names=["eng_Latn-fra_Latn"])
    with pytest.raises(ConfigError, match="select no direction"):
        select_directions(available, src_langs=["hin_Deva"], tgt_langs=["fra_Latn"])


def test_load_checks_the_file(dataset: Path) -> None:
    source = DatasetSource(dataset, {})
    direction = Direction("eng_Latn", "fra_Latn")
    assert len(source.load(direction, limit=3)) == 3
    path = dataset / "eng_Latn-fra_Latn.parquet"
    frame = pd.read_parquet(path)
    frame.loc[5, "tgt_lang"] = "deu_Latn"
    frame.to_parquet(path)
    with pytest.raises(ValueError, match=r"row 5: tgt_lang is 'deu_Latn', expected 'fra_Latn'"):
        source.load(direction)
    assert len(source.load(direction, limit=5)) == 5
    with pytest.raises(FileNotFoundError, match="eng_Latn-zul_Latn"):
        source.load(Direction("eng_Latn", "zul_Latn"))


def test_stray_file_names_are_reported(dataset: Path) -> None:
    (dataset / "notes.parquet").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"notes.parquet: 'notes' is not a direction"):
        DatasetSource(dataset, {}).directions()


def test_sentences_digest_notices_changes(dataset: Path) -> None:
    frame = pd.read_parquet(dataset / "eng_Latn-fra_Latn.parquet")
    changed = frame.copy()
    changed.loc[3, "tgt_text"] += " "
    assert sentences_digest(frame) == sentences_digest(frame.copy())
    assert sentences_digest(frame) != sentences_digest(changed)


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
