"""Prefetching from the Hub: what a configuration needs, which files of each repository that
is, and a run that needs nothing else afterwards, against the local hub (tests/hub_server.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from bouquet_eval.data.hub import PARTS, HubError, HubFiles, select_files
from bouquet_eval.metrics.records import MetricSet
from bouquet_eval.planning.plan import plan_model

from .conftest import Workflow
from .hub_datasets import SENTENCE_LEVEL, bouquet_on_hub
from .hub_server import HubServer, files_of
from .tiny_fasttext import build_tiny_model
from .tiny_mt5 import build_tiny_mt5
from .tiny_seq2seq import build_nllb

DIRECTIONS = ["eng_Latn-fra_Latn", "fra_Latn-deu_Latn", "eng_Latn-cmn_Hans"]
# google/mt5-xl as it is on the Hub: the tokenizer beside the weights in three formats.
MT5_XL_LISTING = [
    ".gitattributes",
    "README.md",
    "config.json",
    "flax_model.msgpack",
    "generation_config.json",
    "pytorch_model.bin",
    "special_tokens_map.json",
    "spiece.model",
    "tf_model.h5",
    "tokenizer_config.json",
]


def no_index(name: str) -> dict:
    raise AssertionError(f"{name} read, but no index is needed")


def test_only_the_tokenizer_files_of_a_tokenizer() -> None:
    need = HubFiles("google/mt5-xl", None, "metricx.tokenizer", parts=("tokenizer",))
    assert select_files(MT5_XL_LISTING, need, no_index) == [
        "config.json",
        "special_tokens_map.json",
        "spiece.model",
        "tokenizer_config.json",
    ]
    model = HubFiles("google/mt5-xl", None, "metricx.model", parts=("config", "weights"))
    assert select_files(MT5_XL_LISTING, model, no_index) == [
        "config.json",
        "generation_config.json",
        "pytorch_model.bin",
    ]


def test_one_weight_format_and_the_shards_of_its_index() -> None:
    listing = [
        "config.json",
        "generation_config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "pytorch_model-00001-of-00002.bin",
        "pytorch_model-00002-of-00002.bin",
        "pytorch_model.bin.index.json",
        "original/consolidated.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "additional_chat_templates/tool_use.jinja",
        "onnx/tokenizer.json",
    ]
    index = {
        "weight_map": {
            "a": "model-00001-of-00002.safetensors",
            "b": "model-00002-of-00002.safetensors",
        }
    }
    indexes_read = []

    def read_index(name: str) -> dict:
        indexes_read.append(name)
        return index

    need = HubFiles("org/llm", "v1", "model 'llm'", parts=PARTS)
    assert select_files(listing, need, read_index) == [
        "additional_chat_templates/tool_use.jinja",
        "chat_template.jinja",
        "config.json",
        "generation_config.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "model.safetensors.index.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert indexes_read == ["model.safetensors.index.json"]
    with pytest.raises(HubError, match=r"model org/llm@v1 \(model 'llm'\) has no weights"):
        select_files(["config.json", "tf_model.h5"], need, no_index)


def test_what_a_configuration_needs(tmp_path: Path) -> None:
    local_model = tmp_path / "my-nllb"
    local_model.mkdir()
    config: dict[str, Any] = {
        "metrics": ["chrf", "metricx", "glotlid"],
        "metricx": {"model": "google/metricx-24-hybrid-xl-v2p6", "tokenizer": "google/mt5-xl"},
        "glotlid": {"model": "cis-lmu/glotlid/model_v3.bin", "revision": "v3"},
        "models": [
            {"name": "api", "translator": "openai", "model": "gpt-x"},
            {"name": "local", "translator": "nllb", "model": str(local_model)},
            {"name": "nllb", "translator": "nllb", "model": "facebook/nllb-200-distilled-600M"},
            {
                "name": "madlad",
                "translator": "madlad",
                "model": "google/madlad400-3b-mt",
                "revision": "abc",
            },
            {"name": "aya", "translator": "aya", "model": "CohereForAI/aya-101"},
            {
                "name": "llm",
                "translator": "vllm",
                "model": "org/llm",
                "revision": "v2",
                "engine_args": {"tokenizer": "org/tokenizer", "tokenizer_revision": "t1"},
            },
        ],
    }
    models = [plan_model(entry, tmp_path / entry["name"], None) for entry in config["models"]]
    needs = [need for model in models for need in model.hub_needs]
    assert [*needs, *MetricSet.of(["metricx", "glotlid"], config).hub_needs()] == [
        HubFiles("facebook/nllb-200-distilled-600M", None, "model 'nllb'", parts=PARTS),
        HubFiles("google/madlad400-3b-mt", "abc", "model 'madlad'", parts=PARTS),
        HubFiles("CohereForAI/aya-101", None, "model 'aya'", parts=PARTS),
        HubFiles("org/llm", "v2", "model 'llm'", parts=PARTS),
        HubFiles("org/tokenizer", "t1", "model 'llm' engine_args.tokenizer", parts=("tokenizer",)),
        HubFiles(
            "google/metricx-24-hybrid-xl-v2p6", None, "metricx.model", parts=("config", "weights")
        ),
        HubFiles("google/mt5-xl", None, "metricx.tokenizer", parts=("tokenizer",)),
        HubFiles("cis-lmu/glotlid", "v3", "glotlid.model", filename="model_v3.bin"),
    ]
    lid = tmp_path / "lid.bin"
    lid.write_bytes(b"")
    local_metrics = {**config, "glotlid": {"model": str(lid), "revision": None}, "models": []}
    local_metrics["metricx"] = {"model": str(local_model), "tokenizer": "google/mt5-xl"}
    assert MetricSet.of(["metricx", "glotlid"], local_metrics).hub_needs() == [
        HubFiles("google/mt5-xl", None, "metricx.tokenizer", parts=("tokenizer",))
    ]


def publish_models(hub: HubServer, folder: Path) -> dict[str, set[str]]:
    """Tiny NLLB, MetricX and GlotLID repositories, each with files a run must not fetch;
    returns the files a run needs, per repository key."""
    nllb = build_nllb(folder / "nllb")
    metricx = build_tiny_mt5(folder / "metricx")
    lid = build_tiny_model(folder / "lid.bin")
    weights_again = {"pytorch_model.bin": b"the same weights, in another format"}
    mt5_config = (metricx.model / "config.json").read_bytes()
    # (repository, the files a run needs, files it must not fetch)
    repositories: list[tuple[str, dict[str, bytes], dict[str, bytes]]] = [
        (
            "facebook/nllb-tiny",
            files_of(nllb),
            {**weights_again, "flax_model.msgpack": b"flax", "onnx/model.onnx": b"onnx"},
        ),
        ("google/metricx-tiny", files_of(metricx.model), weights_again),
        # Like google/mt5-xl: the tokenizer beside weights in three formats.
        (
            "google/mt5-tiny",
            {**files_of(metricx.tokenizer), "config.json": mt5_config},
            {**weights_again, "tf_model.h5": b"tf", "flax_model.msgpack": b"flax"},
        ),
        ("cis-lmu/glotlid", {"model_v3.bin": lid.read_bytes()}, {"model_v2.bin": b"older"}),
    ]
    needed = {}
    for repo_id, wanted, unwanted in repositories:
        repository = hub.repository(repo_id)
        repository.commit({**wanted, **unwanted, "README.md": b"a card", ".gitattributes": b""})
        needed[repository.key] = set(wanted)
    return needed


def test_after_prefetch_a_run_needs_nothing_else(
    dataset: Path, tmp_path: Path, workflow: Workflow
) -> None:
    with HubServer() as hub:
        for path in dataset.glob("*.parquet"):
            if path.stem not in DIRECTIONS:
                path.unlink()
        bouquet = bouquet_on_hub(hub, dataset)
        hub.grant("hf_reader", bouquet)
        needed = publish_models(hub, tmp_path / "models")
        needed[bouquet.key] = {f"{SENTENCE_LEVEL}/test/{name}.parquet" for name in DIRECTIONS}
        workflow.write_config(
            {
                "dataset": {"name": "facebook/bouquet", "revision": "main"},
                "directions": {"list": DIRECTIONS[:2]},
                "limit": 3,
                "shards": 1,
                "metrics": ["chrf", "metricx", "glotlid"],
                "metricx": {
                    "model": "google/metricx-tiny",
                    "tokenizer": "google/mt5-tiny",
                    "device": "cpu",
                    "batch_tokens": 512,
                },
                "glotlid": {"model": "cis-lmu/glotlid/model_v3.bin", "revision": "main"},
                "models": [
                    {
                        "name": "nllb",
                        "translator": "nllb",
                        "model": "facebook/nllb-tiny",
                        "revision": "main",
                        "device": "cpu",
                        "max_new_tokens": 8,
                    }
                ],
            }
        )
        cache = tmp_path / "hf"
        workflow.run("prefetch", env=hub.environment(cache, token="hf_reader"))
        fetched: dict[str, set[str]] = {}
        for download in hub.downloads():
            kind, owner, name, file = download.split("/", 3)
            fetched.setdefault(f"{kind}/{owner}/{name}", set()).add(file)
        assert fetched == needed
        log = (workflow.workdir / "logs" / "prefetch.log").read_text()
        lid_commit = hub.repositories["models/cis-lmu/glotlid"].branches["main"]
        assert f"glotlid.model: model cis-lmu/glotlid@main at {lid_commit}: model_v3.bin" in log

        hub.clear()
        workflow.run(env={**hub.environment(cache), "HF_HUB_OFFLINE": "1"})
        assert hub.requests == []

    folder = workflow.workdir / "runs" / "nllb"
    scores = pd.read_csv(folder / "scores.csv")
    directions = scores["src_lang"] + "-" + scores["tgt_lang"]
    assert sorted(directions) == sorted(DIRECTIONS[:2])
    assert {"chrfpp", "metricx", "glotlid_score", "glotlid_x_metricx"} <= set(scores.columns)
    (entry,) = json.loads((folder / "manifest.json").read_text())["entries"]
    assert entry["dataset"]["commit"] == bouquet.branches["main"]
