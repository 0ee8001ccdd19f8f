"""End-to-end runs of the real workflow (Snakemake in a subprocess) on the bundled sample."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from sacrebleu.metrics import CHRF

from bouquet_eval.planning.sharding import assign_shards

from .conftest import Workflow
from .workflow_configs import (
    SAMPLE_DIRECTIONS,
    bounds_config,
    recorded,
    recording_model,
)


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Modification time and content of every per-direction output."""
    return {
        path.name: (path.stat().st_mtime_ns, path.read_bytes())
        for path in sorted(folder.iterdir())
        if path.name.endswith((".jsonl", ".scored.parquet"))
    }


def test_sample_end_to_end(workflow: Workflow, dataset: Path) -> None:
    workflow.write_config(bounds_config(dataset))
    workflow.run()
    chrf = CHRF(word_order=2)
    for model in ("copy-source", "reference"):
        folder = workflow.workdir / "runs" / model
        for direction in SAMPLE_DIRECTIONS:
            source = pd.read_parquet(dataset / f"{direction}.parquet")
            translations = pd.read_json(folder / f"{direction}.jsonl", lines=True, dtype=False)
            assert list(translations.columns) == [
                "src_lang",
                "tgt_lang",
                "src_text",
                "ref_text",
                "mt_text",
                "uniq_id",
            ]
            assert translations["src_text"].tolist() == source["src_text"].tolist()
            assert translations["ref_text"].tolist() == source["tgt_text"].tolist()
            expected_mt = source["src_text" if model == "copy-source" else "tgt_text"]
            assert translations["mt_text"].tolist() == expected_mt.tolist()
            scored = pd.read_parquet(folder / f"{direction}.scored.parquet")
            assert scored["chrfpp"].tolist() == [
                chrf.sentence_score(mt, [ref]).score
                for mt, ref in zip(scored["mt_text"], scored["ref_text"], strict=True)
            ]
        scores = pd.read_csv(folder / "scores.csv")
        assert len(scores) == len(SAMPLE_DIRECTIONS)
        assert (scores["n_sentences"] == 24).all()
        rows = pd.read_parquet(folder / "scored_rows.parquet")
        assert len(rows) == 24 * len(SAMPLE_DIRECTIONS)
        means = rows.groupby(["src_lang", "tgt_lang"])["chrfpp"].mean()
        for row in scores.itertuples():
            assert row.chrfpp == pytest.approx(means[(row.src_lang, row.tgt_lang)], abs=1e-12)
        manifest = json.loads((folder / "manifest.json").read_text())
        (entry,) = manifest["entries"]
        assert entry["model"]["translator"] == model
        assert entry["n_directions"] == len(SAMPLE_DIRECTIONS)
        assert entry["dataset"] == {"path": str(dataset)}
        assert entry["metrics"]["chrf"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:2")
        assert "--configfile" in entry["command"]
        # What produced it: this checkout's commit, and per stage the packages its jobs ran.
        assert re.fullmatch("[0-9a-f]{40}", entry["workflow"]["commit"])
        for stage in ("translate", "score"):
            (environment,) = entry["environments"][stage]
            assert environment["packages"]["sacrebleu"] == "2.6.0"
        assert entry["model"]["settings"] == {}
        # The configuration with this model alone.
        assert [m["name"] for m in entry["config"]["models"]] == [model]
    reference = pd.read_csv(workflow.workdir / "runs" / "reference" / "scores.csv")
    assert (reference["chrfpp"] == 100.0).all()
    assert (reference["chrfpp_corpus"] == 100.0).all()
    assert (reference["chrfpp_ci_low"] == 100.0).all()
    summary = pd.read_csv(workflow.workdir / "runs" / "reference" / "summary.csv")
    assert summary.iloc[0].to_dict() == {
        "group_by": "all", "group": "all", "n_directions": len(SAMPLE_DIRECTIONS),
        "chrfpp": 100.0, "chrfpp_ci_low": 100.0, "chrfpp_ci_high": 100.0, "chrfpp_corpus": 100.0,
    }  # fmt: skip
    copy = pd.read_csv(workflow.workdir / "runs" / "copy-source" / "scores.csv")
    assert (copy["chrfpp"] < 40).all()
    assert (copy["chrfpp_ci_low"] < copy["chrfpp"]).all()
    assert (copy["chrfpp"] < copy["chrfpp_ci_high"]).all()

    workflow.run("compare")
    comparison = pd.read_csv(workflow.workdir / "runs" / "comparison.csv")
    assert set(comparison["baseline"]) == {"copy-source"}
    assert len(comparison) == len(SAMPLE_DIRECTIONS) + 1
    overall = comparison[comparison["src_lang"] == "all"].iloc[0]
    assert overall["system_mean"] == 100.0
    assert overall["p_approximate_randomization"] < 0.001
    # Every job logged to logs/.
    assert (workflow.workdir / "logs" / "reference" / "aggregate.log").read_text()


def test_deleted_directions_are_recomputed_alone(workflow: Workflow, dataset: Path) -> None:
    record = workflow.workdir / "record.txt"
    config = bounds_config(dataset, models=[recording_model("rec", record)])
    workflow.write_config(config)
    workflow.run()
    folder = workflow.workdir / "runs" / "rec"
    before = snapshot(folder)
    manifest_before = json.loads((folder / "manifest.json").read_text())
    assert sorted(recorded(record)) == sorted(["LOAD"] * 3 + [d.name for d in SAMPLE_DIRECTIONS])

    deleted = [SAMPLE_DIRECTIONS[0], SAMPLE_DIRECTIONS[-1]]
    for direction in deleted:
        (folder / f"{direction}.jsonl").unlink()
        (folder / f"{direction}.scored.parquet").unlink()
    shards = assign_shards(SAMPLE_DIRECTIONS, 3)
    owning = {name for name, members in shards.items() if set(members) & set(deleted)}
    plan = workflow.planned_jobs()
    assert plan == {
        **{f"translate_rec_{name}": 1 for name in owning},
        # chrF++ alone is one family of metrics: its jobs write the scored files too.
        **{f"score_workflow_cpu_rec_{name}": 1 for name in owning},
        "aggregate": 1,
        "heatmaps": 1,
        "leaderboard": 1,
        "all": 1,
    }

    record.unlink()
    workflow.run()
    after = snapshot(folder)
    assert after.keys() == before.keys()
    # Finished work comes back from the cache: nothing is translated again.
    assert recorded(record) == []
    sharing_a_job = {
        f"{direction}.{suffix}"
        for name in owning
        for direction in shards[name]
        for suffix in ("jsonl", "scored.parquet")
    }
    for name, (mtime, content) in before.items():
        assert after[name][1] == content, f"{name} changed"
        if name not in sharing_a_job:
            assert after[name][0] == mtime, f"{name} was touched"
    manifest_after = json.loads((folder / "manifest.json").read_text())
    assert manifest_after["entries"][:1] == manifest_before["entries"]
    assert len(manifest_after["entries"]) == 2

    nothing = workflow.run()
    assert "Nothing to be done" in nothing.stdout + nothing.stderr
    assert snapshot(folder) == after

    # Without the cache, a deleted direction is translated again, and only that one.
    (folder / f"{deleted[0]}.jsonl").unlink()
    for cached in folder.glob(f".cache/*/{deleted[0]}.jsonl"):
        cached.unlink()
    workflow.run()
    assert recorded(record) == ["LOAD", deleted[0].name]
    assert snapshot(folder)[f"{deleted[0]}.jsonl"][1] == before[f"{deleted[0]}.jsonl"][1]


def test_changed_setting_recomputes_that_model_only(workflow: Workflow, dataset: Path) -> None:
    record_a, record_b = workflow.workdir / "a.txt", workflow.workdir / "b.txt"
    config = bounds_config(
        dataset, models=[recording_model("a", record_a), recording_model("b", record_b)]
    )
    workflow.write_config(config)
    workflow.run()
    untouched = snapshot(workflow.workdir / "runs" / "b")
    record_a.unlink()
    record_b.unlink()

    config["models"][0]["translator_kwargs"]["suffix"] = " (v2)"
    workflow.write_config(config)
    plan = workflow.planned_jobs()
    assert plan and all(
        rule.endswith("_a_" + rule.rsplit("_", 1)[-1]) or rule in ("aggregate", "all")
        for rule in plan
        if rule.startswith(("translate", "score"))
    )
    assert plan["aggregate"] == 1
    workflow.run()
    assert sorted(recorded(record_a)) == sorted(["LOAD"] * 3 + [d.name for d in SAMPLE_DIRECTIONS])
    assert recorded(record_b) == []
    assert snapshot(workflow.workdir / "runs" / "b") == untouched
    translations = pd.read_json(
        workflow.workdir / "runs" / "a" / f"{SAMPLE_DIRECTIONS[0]}.jsonl", lines=True
    )
    assert translations["mt_text"].str.endswith(" (v2)").all()


def test_changing_the_shard_count_recomputes_nothing(workflow: Workflow, dataset: Path) -> None:
    record = workflow.workdir / "record.txt"
    config = bounds_config(dataset, models=[recording_model("rec", record)])
    workflow.write_config(config)
    workflow.run()
    folder = workflow.workdir / "runs" / "rec"
    before = snapshot(folder)
    record.unlink()
    for shards in (5, "per-direction"):
        config["shards"] = shards
        workflow.write_config(config)
        workflow.run()
        # The regrouped jobs run (their set of inputs changed), find every direction done and
        # load no translator; Snakemake only refreshes the outputs' modification times.
        assert recorded(record) == []
        assert {name: content for name, (_, content) in snapshot(folder).items()} == {
            name: content for name, (_, content) in before.items()
        }


def test_failing_direction_keeps_finished_work(workflow: Workflow, dataset: Path) -> None:
    record = workflow.workdir / "record.txt"
    flag = workflow.workdir / "fail-now"
    flag.touch()
    config = bounds_config(
        dataset,
        shards=1,
        models=[
            recording_model("rec", record, fail_on_target="rus_Cyrl", fail_while_exists=str(flag))
        ],
    )
    workflow.write_config(config)
    failed = workflow.run(check=False)
    assert failed.returncode != 0
    log = (workflow.workdir / "logs" / "rec" / "translate" / "shard0of1.log").read_text()
    assert "simulated failure on eng_Latn-rus_Cyrl" in log
    done_before_failure = [line for line in recorded(record) if line != "LOAD"]
    assert done_before_failure and "eng_Latn-rus_Cyrl" not in done_before_failure
    folder = workflow.workdir / "runs" / "rec"
    # Snakemake removed the failed job's new outputs; none is left half-written as complete.
    assert not list(folder.glob("*.jsonl"))
    assert not list(folder.glob(".*.tmp"))
    assert len(list(folder.glob(".cache/*/*.jsonl"))) == len(done_before_failure)

    flag.unlink()
    record.unlink()
    workflow.run()
    recomputed = [line for line in recorded(record) if line != "LOAD"]
    assert sorted(recomputed) == sorted(
        d.name for d in SAMPLE_DIRECTIONS if d.name not in done_before_failure
    )
    assert len(list(folder.glob("*.jsonl"))) == len(SAMPLE_DIRECTIONS)


def test_prompt_factory_and_limit(workflow: Workflow, dataset: Path) -> None:
    record = workflow.workdir / "record.txt"
    model = {
        **recording_model("rec", record),
        "prompt_fn": "recording:make_tagged_prompt",
        "prompt_kwargs": {"prefix": ">> "},
    }
    workflow.write_config(
        bounds_config(dataset, models=[model], limit=5, directions={"list": ["eng_Latn-fra_Latn"]})
    )
    workflow.run()
    rows = pd.read_json(workflow.workdir / "runs" / "rec" / "eng_Latn-fra_Latn.jsonl", lines=True)
    source = pd.read_parquet(dataset / "eng_Latn-fra_Latn.parquet").head(5)
    assert rows["mt_text"].tolist() == [">> " + text.upper() for text in source["src_text"]]
    assert sorted(p.name for p in (workflow.workdir / "runs" / "rec").glob("*.jsonl")) == [
        "eng_Latn-fra_Latn.jsonl"
    ]


def test_direction_filters(workflow: Workflow, dataset: Path) -> None:
    workflow.write_config(
        bounds_config(
            dataset, directions={"src_langs": ["eng_Latn"], "tgt_langs": ["cmn_Hans", "hin_Deva"]}
        )
    )
    workflow.run("translations")
    produced = sorted(p.name for p in (workflow.workdir / "runs" / "reference").glob("*.jsonl"))
    assert produced == ["eng_Latn-cmn_Hans.jsonl", "eng_Latn-hin_Deva.jsonl"]
    assert not (workflow.workdir / "runs" / "reference" / "scores.csv").exists()


def test_a_secret_in_the_configuration_stops_the_run(workflow: Workflow, dataset: Path) -> None:
    """Under a secret name, or as the value of a variable that holds one: nothing runs."""
    secret = "sk-this-must-not-leak-123"
    record = workflow.workdir / "record.txt"
    for kwargs, key, environment in [
        ({"api_key": secret}, "api_key", {}),
        ({"token_env": "MY_KEY", "note": secret}, "note", {"MY_KEY": secret}),
    ]:
        workflow.write_config(
            bounds_config(
                dataset,
                directions={"list": ["eng_Latn-fra_Latn"]},
                models=[recording_model("rec", record, **kwargs)],
            )
        )
        stopped = workflow.run(check=False, env=environment)
        assert stopped.returncode == 1
        (told,) = [line for line in stopped.stderr.splitlines() if "bouquet-eval:" in line]
        assert told.startswith(
            f"bouquet-eval: {workflow.config_path}: models[0].translator_kwargs.{key} holds "
        ), stopped.stderr
        assert "name that variable in the model's api_key_env" in stopped.stderr
        assert "Traceback" not in stopped.stderr and secret not in stopped.stderr
        assert not record.exists() and not (workflow.workdir / "runs").exists()


def test_dry_run_without_network(workflow: Workflow, dataset: Path) -> None:
    if shutil.which("unshare") is None:
        pytest.fail("util-linux's unshare is needed to cut the network off")
    workflow.write_config(bounds_config(dataset))
    isolated = workflow.run(
        "--dry-run", prefix=("unshare", "--map-root-user", "--net"), env={"HF_HUB_OFFLINE": "1"}
    )
    assert "translate_reference_shard" in isolated.stdout
    assert not (workflow.workdir / "runs").exists()


def test_runs_from_another_directory_with_absolute_output(
    workflow: Workflow, dataset: Path, tmp_path: Path
) -> None:
    output = tmp_path / "elsewhere" / "results"
    workflow.write_config(
        bounds_config(dataset, output_dir=str(output), directions={"list": ["fra_Latn-deu_Latn"]})
    )
    workflow.run()
    assert pq.read_table(output / "reference" / "scored_rows.parquet").num_rows == 24
