from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from bouquet_eval.core.config import ConfigError
from bouquet_eval.data.dataset import (
    DatasetSource,
    Direction,
    as_direction,
    resolve_dataset,
    select_directions,
)

from .conftest import REPOSITORY, SAMPLE, Workflow
from .hub_datasets import SENTENCE_LEVEL, bouquet_on_hub
from .hub_server import HubServer


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
        import build  # type: ignore[import-not-found]  # data/sample/build.py, put on the path above
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
        ConfigError,
        match=r"tgt_filter \(directions.tgt_langs\): no direction of the dataset has language ",
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
        with pytest.raises(ValueError, match=r"row 6: tgt_lang is 'deu_Latn', expected 'fra_Latn'"):
            source.load(direction, limit=limit)
    frame = original.copy()
    frame.loc[7, "uniq_id"] = frame.loc[2, "uniq_id"]
    frame.to_parquet(path)
    with pytest.raises(ValueError, match=rf"{path}, row 8: uniq_id '.+' appears more than once"):
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
    index.write_text(json.dumps(source.check_files(directions, index)))
    assert len(json.loads(index.read_text())) == len(directions)
    path = dataset / "eng_Latn-fra_Latn.parquet"
    pd.read_parquet(path).head(0).to_parquet(path)
    with pytest.raises(ConfigError, match="no sentences"):
        source.check_files(directions, index)


def test_stray_file_names_are_reported(dataset: Path) -> None:
    (dataset / "notes.parquet").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"notes.parquet: 'notes' is not a direction"):
        DatasetSource(dataset, {}).directions()


RESOLVE = """
import hashlib, json, os, sys
from bouquet_eval.core.config import ConfigError
from bouquet_eval.data.dataset import Direction, resolve_dataset

results = []
for token, settings, fetch in json.loads(sys.argv[1]):
    os.environ.pop("HF_TOKEN", None)
    if token is not None:
        os.environ["HF_TOKEN"] = token
    try:
        source = resolve_dataset(settings, fetch=fetch)
    except ConfigError as error:
        results.append({"error": str(error)})
        continue
    frame = source.load(Direction.parse("eng_Latn-fra_Latn"))
    results.append({"identity": source.identity, "directions": len(source.directions()),
                    "digest": hashlib.sha256(frame.to_json().encode()).hexdigest()})
print(json.dumps(results))
"""


def hub_dataset(revision: str, split: str = "test") -> dict:
    return {
        "name": "facebook/bouquet",
        "config": "benchmark_sentence_level",
        "split": split,
        "revision": revision,
        "path": None,
    }


def resolve_from_hub(
    environment: dict[str, str], *attempts: tuple[str | None, dict, bool]
) -> list[dict]:
    """resolve_dataset(settings, fetch=...) with HF_TOKEN=token, for each (token, settings,
    fetch), in a process of its own: huggingface_hub reads HF_ENDPOINT and HF_HOME on import."""
    result = subprocess.run(
        [sys.executable, "-c", RESOLVE, json.dumps(attempts)],
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_gated_dataset_needs_a_token_with_access(dataset: Path, tmp_path: Path) -> None:
    with HubServer() as hub:
        bouquet = bouquet_on_hub(hub, dataset)
        hub.grant("hf_reader", bouquet)
        hub.grant("hf_stranger")
        main = hub_dataset("main")
        without, stranger, wrong, reader = resolve_from_hub(
            hub.environment(tmp_path),
            (None, main, True),
            ("hf_stranger", main, True),
            ("hf_wrong", main, True),
            ("hf_reader", main, True),
        )
        page = f"{hub.url}/datasets/facebook/bouquet"
        assert without["error"].startswith("dataset facebook/bouquet@main (benchmark_sentence")
        assert f"is gated: accept its conditions at {page}" in without["error"]
        assert "export HF_TOKEN=" in without["error"] and "no token was found" in without["error"]
        assert f"has no access to it: accept its conditions at {page}" in stranger["error"]
        assert "the Hub rejected the token in use" in wrong["error"]
        assert reader["identity"]["commit"] == bouquet.branches["main"]
        assert reader["directions"] == len(list(dataset.glob("*.parquet")))
        # Only the test split's files, and only with a token that has access.
        downloads = hub.downloads()
        assert sorted(downloads) == sorted(
            f"datasets/facebook/bouquet/{SENTENCE_LEVEL}/test/{path.name}"
            for path in dataset.glob("*.parquet")
        )
        fetched_with = {r.token for r in hub.requests if r.path.startswith("/files/")}
        assert fetched_with == {None}  # the signed storage URLs are fetched without the token


def test_a_branch_that_moved_and_a_pinned_commit(dataset: Path, tmp_path: Path) -> None:
    with HubServer() as hub:
        bouquet = bouquet_on_hub(hub, dataset)
        hub.grant("hf_reader", bouquet)
        environment = hub.environment(tmp_path, token="hf_reader")
        first = bouquet.branches["main"]
        before, pinned = resolve_from_hub(
            environment, ("hf_reader", hub_dataset("main"), True), (None, hub_dataset(first), True)
        )
        assert before["identity"]["commit"] == pinned["identity"]["commit"] == first

        frame = pd.read_parquet(dataset / "eng_Latn-fra_Latn.parquet")
        frame.loc[0, "tgt_text"] = "Une phrase corrigée."
        changed = tmp_path / "changed.parquet"
        frame.to_parquet(changed)
        second = bouquet.commit(
            {f"{SENTENCE_LEVEL}/test/eng_Latn-fra_Latn.parquet": changed.read_bytes()}
        )
        hub.clear()
        moved, still_pinned = resolve_from_hub(
            environment, ("hf_reader", hub_dataset("main"), True), (None, hub_dataset(first), True)
        )
        # The branch is resolved again: the new commit, whose one changed file is fetched.
        assert moved["identity"]["commit"] == second
        assert moved["identity"]["revision"] == "main"
        assert moved["digest"] != before["digest"]
        assert hub.downloads() == [
            f"datasets/facebook/bouquet/{SENTENCE_LEVEL}/test/eng_Latn-fra_Latn.parquet"
        ]
        # A cached commit costs no request at all.
        assert still_pinned["identity"]["commit"] == first
        assert not any(first in request.path for request in hub.requests)
        assert still_pinned["digest"] == before["digest"]

    # The hub is gone: the main process falls back to the cache, and a job reads only the cache.
    hub.clear()
    offline, job, pinned_offline, dev = resolve_from_hub(
        environment,
        ("hf_reader", hub_dataset("main"), True),
        ("hf_reader", hub_dataset("main"), False),
        ("hf_reader", hub_dataset(first), False),
        ("hf_reader", hub_dataset("main", split="dev"), False),
    )
    assert offline["identity"]["commit"] == job["identity"]["commit"] == second
    assert pinned_offline["identity"]["commit"] == first
    assert "dataset facebook/bouquet@main (benchmark_sentence_level, dev)" in dev["error"]
    assert "is not in the Hugging Face cache" in dev["error"]


def unused_port() -> int:
    """A port nothing listens on: a connection to it is refused, as with no network."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_first_dry_run_without_network_says_what_to_do(
    workflow: Workflow, tmp_path: Path
) -> None:
    """A newcomer's `snakemake -n` with config/config.yaml, an empty cache and no network."""
    workflow.config_path.write_text((REPOSITORY / "config" / "config.yaml").read_text())
    endpoint = f"http://127.0.0.1:{unused_port()}"
    cut_off = {"HF_HOME": str(tmp_path / "empty"), "HF_ENDPOINT": endpoint, "HF_TOKEN": ""}
    result = workflow.run("--dry-run", check=False, env={**cut_off, "HF_HUB_OFFLINE": "0"})
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Traceback" not in output and "huggingface_hub" not in output, output
    (message,) = [line for line in output.splitlines() if "bouquet-eval:" in line]
    assert "dataset facebook/bouquet@main (benchmark_sentence_level, test) is not in" in message
    assert f"the Hub ({endpoint}) could not be reached" in message
    assert "prefetch" in message and "HF_TOKEN" in message and "dataset.path" in message


SEED_CALLS = """
from bouquet_eval import PromptFn, run_translation
from bouquet_eval.data.dataset import select_directions


class MyTranslator:
    def translate(self, prompts):
        return [prompt.splitlines()[-1] for prompt in prompts]


def make_rag_prompt(index_path: str, k: int = 4) -> PromptFn:
    def prompt_fn(src_lang, tgt_lang, src_text):
        return f"{index_path} {k}\\n{src_lang} -> {tgt_lang}:\\n{src_text}"

    return prompt_fn


run_translation(
    translator=MyTranslator(),
    directions=select_directions(src_filter=["eng_Latn"]),
    output_dir="runs/mine/",
)
run_translation(
    translator=MyTranslator(),
    directions=[("eng_Latn", "fra_Latn")],
    output_dir="runs/rag/",
    prompt_fn=make_rag_prompt("/data/my-index"),
)
"""


def test_the_seed_programmatic_calls_as_written(dataset: Path, tmp_path: Path) -> None:
    """The original tool's README calls, unchanged: BOUQuET from the Hub when no dataset is
    named, directions given by filters or as (src, tgt) pairs, a prompt function factory."""
    with HubServer() as hub:
        hub.grant("hf_reader", bouquet_on_hub(hub, dataset))
        subprocess.run(
            [sys.executable, "-c", SEED_CALLS],
            env={**os.environ, **hub.environment(tmp_path, token="hf_reader")},
            cwd=tmp_path,
            check=True,
        )
    out_of_english = sorted(p.stem for p in dataset.glob("eng_Latn-*.parquet"))
    assert sorted(p.stem for p in (tmp_path / "runs" / "mine").glob("*.jsonl")) == out_of_english
    rag = pd.read_json(tmp_path / "runs" / "rag" / "eng_Latn-fra_Latn.jsonl", lines=True)
    source = pd.read_parquet(dataset / "eng_Latn-fra_Latn.parquet")
    assert rag["mt_text"].tolist() == [text.splitlines()[-1] for text in source["src_text"]]
