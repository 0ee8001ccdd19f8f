"""Translator plumbing shared by every backend: bring-your-own translations, reasoning
traces, pre-flight checks, timing and the settings that count."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bouquet_eval.planning.plan import model_settings
from bouquet_eval.translators import model_gpus

from .conftest import SAMPLE, Workflow
from .workflow_configs import SAMPLE_DIRECTIONS, bounds_config, recorded, recording_model


def write_provided(folder: Path, direction: str, rows: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{direction}.jsonl"
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return path


def provided_rows(direction: str) -> list[dict]:
    source = pd.read_parquet(SAMPLE / f"{direction}.parquet")
    return [
        {"src_lang": r.src_lang, "tgt_lang": r.tgt_lang, "src_text": r.src_text,
         "ref_text": r.tgt_text, "mt_text": r.tgt_text.upper(), "uniq_id": r.uniq_id}
        for r in source.itertuples()
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda rows: rows.pop(), "23 line(s), but the dataset has 24 sentence(s)"),
        (lambda rows: rows[2].update(tgt_lang="fra_Latn"), "line 3: tgt_lang is 'fra_Latn'"),
        (lambda rows: rows.insert(0, rows.pop(5)), "line 1: src_text differs from the dataset"),
        (lambda rows: rows[4].pop("mt_text"), "line 5: missing field(s) mt_text"),
    ],
)
def test_provided_translations_are_checked(workflow: Workflow, tmp_path: Path, damage, message):
    rows = provided_rows("eng_Latn-deu_Latn")
    damage(rows)
    path = write_provided(tmp_path / "mine", "eng_Latn-deu_Latn", rows)
    workflow.write_config(
        bounds_config(
            SAMPLE,
            directions={"list": ["eng_Latn-deu_Latn"]},
            models=[{"name": "mine", "translator": "provided", "path": str(tmp_path / "mine")}],
        )
    )
    assert workflow.run(check=False).returncode != 0
    log = next((workflow.workdir / "logs" / "mine" / "translate").glob("*.log")).read_text()
    assert str(path) in log and message in log
    assert not list((workflow.workdir / "runs" / "mine").glob("*.jsonl"))


def test_changed_provided_file_is_taken_again(workflow: Workflow, tmp_path: Path) -> None:
    write_provided(tmp_path / "mine", "eng_Latn-deu_Latn", provided_rows("eng_Latn-deu_Latn"))
    workflow.write_config(
        bounds_config(
            SAMPLE,
            directions={"list": ["eng_Latn-deu_Latn"]},
            models=[{"name": "mine", "translator": "provided", "path": str(tmp_path / "mine")}],
        )
    )
    workflow.run()
    rows = provided_rows("eng_Latn-deu_Latn")
    rows[0]["mt_text"] = "Etwas ganz anderes."
    write_provided(tmp_path / "mine", "eng_Latn-deu_Latn", rows)
    workflow.run()
    taken = pd.read_json(workflow.workdir / "runs" / "mine" / "eng_Latn-deu_Latn.jsonl", lines=True)
    assert taken["mt_text"][0] == "Etwas ganz anderes."


def test_reasoning_is_kept_out_of_the_scores(workflow: Workflow) -> None:
    record = workflow.workdir / "record.txt"
    model = {**recording_model("thinker", record), "translator": "recording:ThinkingTranslator"}
    workflow.write_config(
        bounds_config(SAMPLE, directions={"list": ["eng_Latn-spa_Latn"]}, models=[model])
    )
    workflow.run()
    rows = pd.read_json(workflow.workdir / "runs/thinker/eng_Latn-spa_Latn.jsonl", lines=True)
    source = pd.read_parquet(SAMPLE / "eng_Latn-spa_Latn.parquet")
    assert rows["mt_text"].tolist() == [text.upper() for text in source["src_text"]]
    assert rows["mt_raw"].str.startswith("<think>\nLet me see").all()
    timing = pd.read_csv(workflow.workdir / "runs" / "thinker" / "timing.csv")
    assert timing[["src_lang", "tgt_lang", "sentences"]].values.tolist() == [
        ["eng_Latn", "spa_Latn", 24]
    ]
    assert (timing["seconds"] >= 0).all()
    manifest = json.loads((workflow.workdir / "runs" / "thinker" / "manifest.json").read_text())
    assert manifest["entries"][0]["timing"]["sentences"] == 24


def test_unsupported_directions_fail_before_any_work(workflow: Workflow) -> None:
    record = workflow.workdir / "record.txt"
    model = {
        **recording_model("picky", record, refuse="hin_Deva"),
        "translator": "recording:PickyTranslator",
        "shards": 1,
    }
    workflow.write_config(bounds_config(SAMPLE, models=[model]))
    assert workflow.run(check=False).returncode != 0
    assert recorded(record) == ["LOAD"]  # built, asked, and stopped before translating
    log = (workflow.workdir / "logs" / "picky" / "translate" / "shard0of1.log").read_text()
    assert "this model does not support ['hin_Deva']" in log
    assert len(SAMPLE_DIRECTIONS) > 1


def test_settings_that_count() -> None:
    fast = {"name": "g", "translator": "openai", "model": "m", "concurrency": 64, "seed": 1}
    slow = {**fast, "concurrency": 1, "timeout": 5.0, "max_retries": 0}
    assert model_settings(fast) == model_settings(slow)
    assert model_settings(fast) != model_settings({**fast, "seed": 2})
    assert model_settings(fast)["prompt_template"].startswith("Translate the following text")
    nllb = {"name": "n", "translator": "nllb", "model": "m"}
    assert model_settings(nllb)["prompt_fn"] == "bouquet_eval.translators.hf_seq2seq:nllb_prompt"
    assert model_settings(nllb)["prompt_template"] is None
    # A translator of one's own: every keyword argument decides.
    custom = {"name": "c", "translator": "a.b:C", "translator_kwargs": {"token_env": "K", "n": 1}}
    assert model_settings(custom)["settings"] == {"token_env": "K", "n": 1}


def test_gpus_follow_the_settings() -> None:
    assert model_gpus({"translator": "vllm", "model": "m", "tensor_parallel_size": 4}) == 4
    assert model_gpus({"translator": "vllm", "model": "m"}) == 1
    assert model_gpus({"translator": "nllb", "model": "m"}) == 1
    assert model_gpus({"translator": "nllb", "model": "m", "device": "cpu"}) == 0
    assert model_gpus({"translator": "openai", "model": "m"}) == 0
    assert model_gpus({"translator": "a.b:C"}) == 0
    assert model_gpus({"translator": "a.b:C", "gpus": 2}) == 2
