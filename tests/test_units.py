"""Small modules: prompt, sharding, provenance, translators, metrics, aggregation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from sacrebleu.metrics import CHRF

from bouquet_eval import Translator, build_prompt
from bouquet_eval.core.freshness import ResumableOutput
from bouquet_eval.core.stats import Resampling
from bouquet_eval.data.dataset import Direction
from bouquet_eval.metrics import load_metric
from bouquet_eval.planning.runs import (
    RUNS,
    RunningError,
    _start_time,
    refuse_beside_live_runs,
    register,
)
from bouquet_eval.planning.sharding import assign_shards, shard_index
from bouquet_eval.results.aggregate import append_manifest, direction_scores
from bouquet_eval.translators import load_prompt_fn, load_translator
from bouquet_eval.translators.bounds import CopySource
from bouquet_eval.translators.prompt import language_name


@pytest.mark.parametrize(
    ("code", "name"),
    [
        ("eng_Latn", "English"),
        ("cmn_Hans", "Chinese (Simplified)"),
        ("cmn_Hant", "Chinese (Traditional)"),
        ("por_Latn_braz1246", "Brazilian Portuguese"),
        ("arz_Arab", "Egyptian Arabic"),
        ("hin_Deva", "Hindi"),
        ("swh_Latn", "Swahili"),
        ("srp_Latn", "Serbian (Latin)"),
    ],
)
def test_language_names(code: str, name: str) -> None:
    assert language_name(code) == name


def test_default_prompt_keeps_the_source_verbatim() -> None:
    source = "Liste :\n- pain 🎉"
    prompt = build_prompt("fra_Latn", "cmn_Hant", source)
    assert "from French into Chinese (Traditional)" in prompt
    assert prompt.endswith("\n\n" + source)


def test_shards_are_stable_and_independent_of_the_selection() -> None:
    names = [f"eng_Latn-{code}_Latn" for code in ("fra", "deu", "spa", "ita", "nld", "pol")]
    everything = [Direction.parse(name) for name in names]
    full = assign_shards(everything, 3)
    partial = assign_shards(everything[:2], 3)
    for shard, members in partial.items():
        assert set(members) <= set(full[shard])
    assert sorted(d for members in full.values() for d in members) == sorted(everything)
    # crc32 is fixed by its definition, so the assignment never changes between runs.
    assert shard_index(Direction.parse("eng_Latn-fra_Latn"), 8) == 0xF47A2614 % 8 == 4
    assert assign_shards(everything, "per-direction") == {d.name: [d] for d in sorted(everything)}
    with pytest.raises(ValueError):
        assign_shards(everything, 0)


def write_text(text: str):
    return lambda path: path.write_text(text, encoding="utf-8")


def test_resumable_output(tmp_path: Path) -> None:
    output = ResumableOutput(tmp_path / "eng_Latn-fra_Latn.jsonl", {"setting": 1})
    assert not output.is_current()
    assert not output.restore_from_cache()
    output.publish(write_text("first\n"))
    assert output.is_current()
    assert output.cached.read_text() == "first\n"
    record = json.loads(output.sidecar.read_text())
    assert record["settings"] == {"setting": 1}

    output.path.write_text("edited by hand\n")
    assert not output.is_current()
    assert output.restore_from_cache()
    assert output.path.read_text() == "first\n"

    changed = ResumableOutput(output.path, {"setting": 2})
    assert not changed.is_current()
    assert not changed.restore_from_cache()
    output.path.unlink()
    assert output.restore_from_cache() and output.is_current()


def test_failed_write_leaves_nothing(tmp_path: Path) -> None:
    output = ResumableOutput(tmp_path / "x.jsonl", {})

    def failing(path: Path) -> None:
        path.write_text("partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        output.publish(failing)
    assert not output.path.exists() and not output.cached.exists()
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def suffixed_prompt(suffix: str):
    return lambda src_lang, tgt_lang, text: build_prompt(src_lang, tgt_lang, text) + suffix


def test_loading_translators_and_prompt_functions() -> None:
    assert isinstance(load_translator("copy-source", {}), CopySource)
    with pytest.raises(ImportError, match="cannot import module 'no_such_module'"):
        load_translator("no_such_module:X", {})
    with pytest.raises(TypeError, match="has no translate"):
        load_translator("builtins:object", {})

    class Upper:
        def translate(self, prompts: list[str]) -> list[str]:
            return [p.upper() for p in prompts]

    assert isinstance(Upper(), Translator)
    assert load_prompt_fn(None, None) is build_prompt
    assert load_prompt_fn("bouquet_eval.translators.prompt:build_prompt", None) is build_prompt
    made = load_prompt_fn("tests.test_units:suffixed_prompt", {"suffix": "!"})
    assert made("eng_Latn", "fra_Latn", "x") == build_prompt("eng_Latn", "fra_Latn", "x") + "!"


def test_chrf_metric_is_sacrebleu_chrf_plus_plus() -> None:
    metric = load_metric("chrf")
    rows = pd.DataFrame(
        {"mt_text": ["Le chat dort.", "", "x"], "ref_text": ["Le chat dort !", "a", "x"]}
    )
    reference = CHRF(word_order=2)
    assert metric.score(rows)["chrfpp"] == [
        reference.sentence_score(h, [r]).score
        for h, r in zip(rows["mt_text"], rows["ref_text"], strict=True)
    ]
    assert metric.signature() == "nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.6.0"


def test_direction_scores_skip_missing_values(tmp_path: Path) -> None:
    rows = pd.DataFrame(
        {
            "src_lang": ["a_Latn"] * 3 + ["b_Latn"],
            "tgt_lang": ["c_Latn"] * 4,
            "metricx": [10.0, None, 30.0, 5.0],
        }
    )
    scores = direction_scores(rows, ["metricx"], Resampling(bootstrap_resamples=50))
    assert scores[["src_lang", "n_sentences", "metricx"]].to_dict(orient="records") == [
        {"src_lang": "a_Latn", "n_sentences": 3, "metricx": 20.0},
        {"src_lang": "b_Latn", "n_sentences": 1, "metricx": 5.0},
    ]
    manifest = tmp_path / "manifest.json"
    append_manifest(manifest, {"run": 1})
    append_manifest(manifest, {"run": 2})
    assert json.loads(manifest.read_text()) == {"entries": [{"run": 1}, {"run": 2}]}


def test_api_docs_by_hand_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The "Running one step by hand" example of docs/api.md, executed as written."""
    import re

    from .conftest import REPOSITORY

    page = (REPOSITORY / "docs" / "api.md").read_text(encoding="utf-8")
    (example,) = re.findall(
        r"<!-- runnable: by-hand -->\n```python\n(.*?)```", page, flags=re.DOTALL
    )
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "docs/api.md", "exec"), {})
    scored = sorted(p.name for p in (tmp_path / "runs" / "by-hand").glob("*.scored.parquet"))
    assert scored and all(name.startswith("eng_Latn-") for name in scored)


def test_a_run_recorded_on_another_machine_is_named_with_its_record(tmp_path: Path) -> None:
    """It cannot be seen from here, so it is taken for alive: the message says which record to
    delete once it has ended."""
    (tmp_path / RUNS).mkdir(parents=True)
    record = tmp_path / RUNS / "elsewhere-7.json"
    record.write_text(json.dumps({"host": "elsewhere", "pid": 7, "started": "1"}))
    with pytest.raises(RunningError, match=r"PID 7 on host elsewhere.*delete .*elsewhere-7\.json"):
        refuse_beside_live_runs(["runs/a/x.jsonl"], tmp_path)
    record.unlink()
    refuse_beside_live_runs(["runs/a/x.jsonl"], tmp_path)


def test_a_live_run_of_other_outputs_does_not_stop_a_run(tmp_path: Path) -> None:
    """Parts of one selection run side by side; a run that writes what another writes waits."""
    first = register(["snakemake"], ["runs/a/x.jsonl"], tmp_path)
    # Recorded as another process of this machine that is alive: this test's parent.
    record = json.loads(first.read_text())
    parent = {**record, "pid": os.getppid(), "started": _start_time(os.getppid())}
    first.write_text(json.dumps(parent))
    refuse_beside_live_runs(["runs/a/y.jsonl"], tmp_path)
    with pytest.raises(RunningError, match=rf"PID {os.getppid()} on host"):
        refuse_beside_live_runs(["runs/a/y.jsonl", "runs/a/x.jsonl"], tmp_path)
