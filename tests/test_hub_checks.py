"""Before any job starts, every Hub model and tokenizer that the run's jobs would load is in the
cache or can be had from the Hub; otherwise the run stops naming it and the command that
fetches it, in the terms of the interface the user runs (the command, Snakemake, Python)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from bouquet_eval.data.hub import HubFiles, cached

from .conftest import Workflow, patience
from .hf_cache import cache_entry
from .hub_server import HubServer
from .test_command import command
from .test_data import unused_port
from .test_prefetch import publish_models

MODEL_PARTS = ("config", "tokenizer", "weights")


def test_what_the_cache_holds_is_read_as_prefetch_leaves_it(tmp_path: Path, monkeypatch) -> None:
    from huggingface_hub import constants

    hub = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    model = HubFiles("org/model", None, "model 'm'", parts=MODEL_PARTS)
    assert not cached(model)
    index = {"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}}
    files = {
        "config.json": b"{}",
        "tokenizer_config.json": b"{}",
        "model.safetensors.index.json": json.dumps(index).encode(),
        "model-1.safetensors": b"1",
    }
    cache_entry(hub, "org/model", files)
    # A shard of the index is missing: the weights are not there; the rest is.
    assert not cached(model)
    assert cached(replace(model, parts=("config", "tokenizer")))
    cache_entry(hub, "org/model", {"model-2.safetensors": b"2"})
    assert cached(model)
    # A tokenizer is more than the model's config.
    cache_entry(hub, "org/bare", {"config.json": b"{}"})
    assert not cached(HubFiles("org/bare", None, "t", parts=("tokenizer",)))
    lid = HubFiles("org/model", None, "glotlid.model", filename="model_v3.bin")
    assert not cached(lid)
    cache_entry(hub, "org/model", {"model_v3.bin": b"lid"})
    assert cached(lid)


def score_offline(cwd: Path, dataset: Path, env: dict[str, str], *flags: str):
    """The seed's `score` of translations brought by the user, with its default metrics."""
    folder = cwd / "runs" / "mine"
    folder.mkdir(parents=True, exist_ok=True)
    rows = pd.read_parquet(dataset / "eng_Latn-fra_Latn.parquet")
    rows = rows.rename(columns={"tgt_text": "ref_text"}).assign(mt_text=rows["tgt_text"])
    columns = ["src_lang", "tgt_lang", "src_text", "ref_text", "mt_text"]
    rows[columns].to_json(folder / "eng_Latn-fra_Latn.jsonl", orient="records", lines=True)
    started = time.monotonic()
    result = command(
        cwd, "score", "--output-dir", "runs/mine", "--dataset-path", "dataset", *flags, env=env
    )
    return result, time.monotonic() - started


def test_score_with_the_default_metrics_offline_names_the_model(
    tmp_path: Path, dataset: Path
) -> None:
    empty = {"HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": ""}
    folder = tmp_path / "runs" / "mine"
    prefetch = f"`bouquet-eval prefetch --output-dir {folder}`"
    # HF_HUB_OFFLINE set, then no network (a Hub that refuses connections).
    endpoint = f"http://127.0.0.1:{unused_port()}"
    for env, reason in (
        ({**empty, "HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE is set"),
        ({**empty, "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": endpoint}, "could not be reached"),
    ):
        result, seconds = score_offline(tmp_path, dataset, env)
        # At once: no retries against a Hub that cannot answer.
        assert result.returncode == 1 and seconds < patience(30)
        first = result.stderr.splitlines()[0]
        assert first.startswith(
            "bouquet-eval: model google/metricx-24-hybrid-xl-v2p6@main (metricx.model) is not "
            "in the Hugging Face cache"
        ), result.stderr
        assert reason in first and prefetch in first and "No job was started" in first
        assert "--configfile" not in result.stderr and "snakemake -s" not in first
        assert not (folder / "logs" / "mine").exists()  # no job's log: none started


def test_the_nllb_example_offline_names_its_model(tmp_path: Path, dataset: Path) -> None:
    kwargs = '{"model": "facebook/nllb-200-distilled-600M"}'
    result = command(
        tmp_path, "translate", "--translator",
        "bouquet_eval.translators.hf_seq2seq:NLLBTranslator", "--translator-kwargs", kwargs,
        "--src-lang", "eng_Latn", "--tgt-lang", "fra_Latn", "--dataset-path", str(dataset),
        "--output-dir", "runs/nllb",
        env={"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.startswith(
        "bouquet-eval: model facebook/nllb-200-distilled-600M@main (model 'nllb') is not in "
    ), result.stderr


def test_the_prefetch_the_command_names_fetches_what_the_run_needs(
    tmp_path: Path, dataset: Path
) -> None:
    """Offline, the run names the translator's model; the command it names, pasted where the
    Hub can be reached, fetches it; the run then goes on offline."""
    nllb = {"model": "facebook/nllb-tiny", "device": "cpu", "max_new_tokens": 4}
    flags = (
        "run", "--translator", "bouquet_eval.translators.hf_seq2seq:NLLBTranslator",
        "--translator-kwargs", json.dumps(nllb), "--metrics", "chrf,glotlid",
        "--directions", "eng_Latn-fra_Latn", "--limit", "2", "--dataset-path", str(dataset),
        "--output-dir", "runs/nllb", "--cores", "1",
    )  # fmt: skip
    with HubServer() as hub:
        publish_models(hub, tmp_path / "models")
        online = hub.environment(tmp_path / "hf")
        offline = {**online, "HF_HUB_OFFLINE": "1"}
        failed = command(tmp_path, *flags, env=offline)
        assert failed.returncode == 1
        assert "model facebook/nllb-tiny@main (model 'nllb') is not in" in failed.stderr
        hint = re.search(r"`(bouquet-eval prefetch [^`]+)`", failed.stderr)
        assert hint, failed.stderr
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        arguments = shlex.split(hint.group(1))[1:]
        command(elsewhere, *arguments, env=online, check=True)
        hub.clear()
        command(tmp_path, *flags, env=offline, check=True)
        assert hub.requests == []
    assert len(pd.read_csv(tmp_path / "runs" / "nllb" / "scores.csv")) == 1


def test_snakemake_users_are_told_the_snakemake_command(
    workflow: Workflow, dataset: Path, tmp_path: Path
) -> None:
    workflow.write_config(
        {
            "dataset": {"path": str(dataset)},
            "directions": {"list": ["eng_Latn-fra_Latn"]},
            "metrics": ["chrf", "glotlid"],
            "models": [{"name": "copy-source", "translator": "copy-source"}],
        }
    )
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    result = workflow.run(check=False, env=env)
    assert result.returncode != 0
    (line,) = [line for line in result.stderr.splitlines() if "glotlid" in line]
    assert "model cis-lmu/glotlid@main (glotlid.model) is not in the Hugging Face cache" in line
    assert f" prefetch --cores 1 --configfile {workflow.config_path}`" in line, line
    assert not (workflow.workdir / "logs" / "copy-source" / "score").exists()


def test_each_interface_is_told_how_to_do_without_the_hub(tmp_path: Path) -> None:
    """The dataset from the Hub without network: the command's user is told of
    --dataset-path, a Python user of `dataset=`; neither of Snakemake's --configfile."""
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    result = command(
        tmp_path, "run", "--translator", "bouquet_eval.translators.bounds:CopySource",
        "--all", "--output-dir", "runs/copy", env=env,
    )  # fmt: skip
    assert result.returncode == 1
    assert "give --dataset-path a folder of <src>-<tgt>.parquet files" in result.stderr
    assert "bouquet-eval prefetch --output-dir" in result.stderr
    assert "--configfile" not in result.stderr, result.stderr
    script = (
        "from bouquet_eval.data.dataset import select_directions\n"
        "try:\n"
        "    select_directions(src_filter=['eng_Latn'])\n"
        "except ValueError as error:\n"
        "    print(error)\n"
    )
    python = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=Workflow.environment(env),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    said = python.stdout
    assert "is not in the Hugging Face cache" in said, python.stderr
    assert "pass dataset= a folder of <src>-<tgt>.parquet files" in said
    assert "Make the same call on a machine with network access" in said
    assert "--configfile" not in said and "snakemake" not in said
