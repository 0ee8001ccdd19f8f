"""Nothing stale counts as current: real Snakemake runs after failed jobs, damaged files, edited
inputs and translations brought in place; and no secret is written anywhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from .conftest import REPOSITORY, SNAKEFILE, Workflow
from .workflow_configs import bounds_config, recorded, recording_model

FRA = "eng_Latn-fra_Latn"
DEU = "eng_Latn-deu_Latn"
SPA = "eng_Latn-spa_Latn"


def edit_sentence(dataset: Path, direction: str, row: int, text: str) -> None:
    path = dataset / f"{direction}.parquet"
    frame = pd.read_parquet(path)
    frame.loc[row, "src_text"] = text
    frame.to_parquet(path)


def translations(workflow: Workflow, model: str, direction: str) -> list[str]:
    path = workflow.workdir / "runs" / model / f"{direction}.jsonl"
    return pd.read_json(path, lines=True, dtype=False)["mt_text"].tolist()


def scored_texts(workflow: Workflow, model: str, direction: str) -> list[str]:
    folder = workflow.workdir / "runs" / model
    direction_rows = pd.read_parquet(folder / f"{direction}.scored.parquet")
    all_rows = pd.read_parquet(folder / "scored_rows.parquet")
    src, tgt = direction.split("-")
    aggregated = all_rows[(all_rows["src_lang"] == src) & (all_rows["tgt_lang"] == tgt)]
    assert direction_rows["mt_text"].tolist() == aggregated["mt_text"].tolist()
    return direction_rows["mt_text"].tolist()


def recording_config(dataset: Path, record: Path, directions: list[str], **kwargs) -> dict:
    return bounds_config(
        dataset,
        shards=1,
        directions={"list": directions},
        models=[recording_model("rec", record, **kwargs)],
    )


def test_failed_translate_job_leaves_nothing_stale(workflow: Workflow, dataset: Path) -> None:
    record, flag = workflow.workdir / "record.txt", workflow.workdir / "fail"
    workflow.write_config(
        recording_config(
            dataset, record, [DEU, FRA], fail_on_target="fra_Latn", fail_while_exists=str(flag)
        )
    )
    workflow.run()
    edit_sentence(dataset, DEU, 2, "A sentence that was edited.")
    edit_sentence(dataset, FRA, 3, "Another sentence that was edited.")
    flag.touch()
    # The first edited direction is translated, then the job fails on the other one; Snakemake
    # puts the old translations back with a fresh modification time.
    failed = workflow.run(check=False)
    assert failed.returncode != 0 and "Restored previous version" in failed.stderr + failed.stdout
    flag.unlink()
    rerun = workflow.run()
    assert "not current" in rerun.stderr
    assert translations(workflow, "rec", DEU)[2] == "A SENTENCE THAT WAS EDITED."
    assert scored_texts(workflow, "rec", DEU)[2] == "A SENTENCE THAT WAS EDITED."
    assert scored_texts(workflow, "rec", FRA)[3] == "ANOTHER SENTENCE THAT WAS EDITED."
    # Restored from the copy made before the failure: translated once after the edit.
    assert recorded(record).count(DEU) == 2
    assert "Nothing to be done" in workflow.run("--dry-run").stdout


def test_failed_score_job_leaves_nothing_stale(workflow: Workflow, dataset: Path) -> None:
    record, flag = workflow.workdir / "record.txt", workflow.workdir / "fail"
    config = recording_config(dataset, record, [DEU, FRA])
    config["metrics"] = ["chrf", "faults:FlakyMetric"]
    workflow.write_config(config)
    environment = {"FAULT_FLAG": str(flag)}
    workflow.run(env=environment)
    edit_sentence(dataset, FRA, 5, "Another edited sentence.")
    flag.touch()
    assert workflow.run(check=False, env=environment).returncode != 0
    assert translations(workflow, "rec", FRA)[5] == "ANOTHER EDITED SENTENCE."
    flag.unlink()
    workflow.run(env=environment)
    assert scored_texts(workflow, "rec", FRA)[5] == "ANOTHER EDITED SENTENCE."
    scores = pd.read_csv(workflow.workdir / "runs" / "rec" / "scores.csv")
    assert (scores["n_sentences"] == 24).all()


def test_damaged_outputs_are_noticed_and_rebuilt(workflow: Workflow, dataset: Path) -> None:
    record = workflow.workdir / "record.txt"
    workflow.write_config(recording_config(dataset, record, [DEU, FRA, SPA]))
    workflow.run()
    folder = workflow.workdir / "runs" / "rec"
    before = {path.name: path.read_bytes() for path in folder.glob("*.jsonl")}
    # Cut at a line boundary, cut in the middle of a line, and a missing output whose copy in
    # the cache is damaged too; a killed write left a temporary file behind.
    lines = before[f"{DEU}.jsonl"].splitlines(keepends=True)
    (folder / f"{DEU}.jsonl").write_bytes(b"".join(lines[:3]))
    (folder / f"{FRA}.jsonl").write_bytes(before[f"{FRA}.jsonl"][:1000])
    (folder / f"{SPA}.jsonl").unlink()
    (cached,) = folder.glob(f".cache/*/{SPA}.jsonl")
    cached.write_bytes(cached.read_bytes()[:-10])
    stray = folder / f".{SPA}.jsonl.x1y2z3.tmp"
    stray.write_text("half a file")

    plan = workflow.run("--dry-run")
    assert f"runs/rec/{DEU}.jsonl: its content is not what was written" in plan.stderr
    assert f"runs/rec/{FRA}.jsonl: its content is not what was written" in plan.stderr
    workflow.run()
    after = {path.name: path.read_bytes() for path in folder.glob("*.jsonl")}
    assert after == before
    assert recorded(record).count(SPA) == 2 and recorded(record).count(DEU) == 1
    log = (workflow.workdir / "logs" / "rec" / "translate" / "shard0of1.log").read_text()
    discarded = cached.relative_to(workflow.workdir)
    assert f"discarding {discarded}: its content does not match its checksum" in log
    assert not stray.exists()
    assert (pd.read_csv(folder / "scores.csv")["n_sentences"] == 24).all()
    assert "Nothing to be done" in workflow.run("--dry-run").stdout


def test_failed_aggregation_keeps_the_previous_aggregates(workflow: Workflow, dataset: Path):
    record = workflow.workdir / "record.txt"
    workflow.write_config(recording_config(dataset, record, [DEU, FRA]))
    workflow.run()
    folder = workflow.workdir / "runs" / "rec"
    aggregates = ("scores.csv", "summary.csv", "timing.csv", "scored_rows.parquet")
    previous = {name: (folder / name).read_bytes() for name in aggregates}
    edit_sentence(dataset, DEU, 0, "Edited before a failing aggregation.")
    timing = folder / ".timing" / f"{FRA}.json"
    timing.write_text("{ not json")
    assert workflow.run(check=False).returncode != 0
    assert {name: (folder / name).read_bytes() for name in aggregates} == previous
    timing.unlink()
    rerun = workflow.run()
    assert "runs/rec/scores.csv: its " in rerun.stderr
    rows = pd.read_parquet(folder / "scored_rows.parquet")
    assert "EDITED BEFORE A FAILING AGGREGATION." in rows["mt_text"].tolist()
    assert "Nothing to be done" in workflow.run("--dry-run").stdout


def write_four_fields(folder: Path, dataset: Path, direction: str) -> Path:
    """Translations as another tool would bring them: the four fields the README promises."""
    source = pd.read_parquet(dataset / f"{direction}.parquet")
    lines = [
        {"src_lang": r.src_lang, "tgt_lang": r.tgt_lang, "src_text": r.src_text,
         "mt_text": r.tgt_text}
        for r in source.itertuples()
    ]  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{direction}.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return path


def test_translations_in_the_output_folder_are_checked(workflow: Workflow, dataset: Path):
    folder = workflow.workdir / "runs" / "mine"
    paths = {d: write_four_fields(folder, dataset, d) for d in (DEU, FRA)}
    (folder / "eng_Latn-zul_Latn.jsonl").write_text("")
    workflow.write_config(
        bounds_config(
            dataset,
            directions={"list": [DEU, FRA]},
            models=[{"name": "mine", "translator": "provided", "path": "runs/mine"}],
        )
    )
    first = workflow.run()
    assert "eng_Latn-zul_Latn.jsonl is not a direction of the dataset; it is ignored" in (
        first.stderr
    )
    scores = pd.read_csv(folder / "scores.csv")
    assert (scores["chrfpp"] == 100.0).all() and (scores["n_sentences"] == 24).all()
    scored = pd.read_parquet(folder / f"{DEU}.scored.parquet")
    reference = pd.read_parquet(dataset / f"{DEU}.parquet")
    assert scored["ref_text"].tolist() == reference["tgt_text"].tolist()
    assert scored["uniq_id"].tolist() == reference["uniq_id"].tolist()

    good = paths[DEU].read_text().splitlines(keepends=True)
    swapped = [good[0], good[2], good[1], *good[3:]]
    named = f"runs/mine/{DEU}.jsonl"
    damaged = {
        "swapped": (swapped, f"{named}, line 2: src_text differs from the dataset's"),
        "short": (good[:20], f"{named}: 20 line(s), but the dataset has 24 sentence(s)"),
    }
    for lines, message in damaged.values():
        paths[DEU].write_text("".join(lines))
        assert workflow.run(check=False).returncode != 0
        log = "".join(p.read_text() for p in (workflow.workdir / "logs").rglob("*.log"))
        assert message in log
    edited = json.loads(good[4])
    edited["mt_text"] = "Ganz anders."
    paths[DEU].write_text("".join([*good[:4], json.dumps(edited) + "\n", *good[5:]]))
    workflow.run()
    assert pd.read_parquet(folder / f"{DEU}.scored.parquet")["mt_text"][4] == "Ganz anders."

    paths[FRA].unlink()
    missing = workflow.run(check=False)
    assert missing.returncode != 0
    assert (
        f"bouquet-eval: {workflow.config_path}: model 'mine' (translator: provided, path: "
        f"runs/mine): no translations for 1 selected direction(s): runs/mine/{FRA}.jsonl\n"
        in missing.stderr
    )
    assert "WorkflowError" not in missing.stderr and "Traceback" not in missing.stderr


def test_settings_decide_and_secrets_stay_out(workflow: Workflow, dataset: Path) -> None:
    secret, known = "s3cr3t-literal-value", "known-env-secret-42"
    model: dict[str, Any] = {
        "name": "echo",
        "translator": "faults:EchoTranslator",
        "translator_kwargs": {
            "max_tokens": 512,
            "auth": secret,
            "bearer": secret + "-2",
            "token_env": "ECHO_SECRET",
            "header": f"Bearer {known}",
        },
    }
    workflow.write_config(bounds_config(dataset, directions={"list": [DEU]}, models=[model]))
    environment = {"ECHO_SECRET": known}
    first = workflow.run(env=environment)
    assert "literal value at 'models[0].translator_kwargs.auth'" in first.stderr
    assert "literal value at 'models[0].translator_kwargs.bearer'" in first.stderr
    for path in [*(workflow.workdir / "runs").rglob("*"), *(workflow.workdir / "logs").rglob("*")]:
        if path.is_file():
            content = path.read_bytes()
            assert secret.encode() not in content and known.encode() not in content, path
    manifest = json.loads((workflow.workdir / "runs" / "echo" / "manifest.json").read_text())
    kwargs = manifest["entries"][0]["model"]["settings"]
    assert kwargs == {"max_tokens": 512, "auth": "<redacted>", "bearer": "<redacted>",
                      "token_env": "ECHO_SECRET", "header": "<redacted>"}  # fmt: skip

    assert workflow.planned_jobs(env=environment) == {}
    model["translator_kwargs"]["max_tokens"] = 4096
    workflow.write_config(bounds_config(dataset, directions={"list": [DEU]}, models=[model]))
    planned = workflow.planned_jobs(env=environment)
    assert any(name.startswith("translate_echo") for name in planned), planned


def test_a_dry_run_changes_nothing_later_runs_do(workflow: Workflow, dataset: Path) -> None:
    record = workflow.workdir / "record.txt"
    config = recording_config(dataset, record, [DEU, FRA])
    workflow.write_config(config)
    workflow.run()
    # A dry run with another limit finds every output stale and shows the jobs...
    workflow.write_config({**config, "limit": 5})
    planned = workflow.run("--dry-run")
    assert "not current" in planned.stderr and "translate_rec_" in planned.stdout
    # ...and once the configuration is back, nothing is left to do.
    workflow.write_config(config)
    assert "Nothing to be done" in workflow.run("--dry-run").stdout
    workflow.run()
    assert recorded(record).count(DEU) == 1


@pytest.mark.parametrize("dry_run", [["--dry-run"], ["-np"], ["--lint"]])
def test_planning_without_running_writes_nothing(
    workflow: Workflow, dataset: Path, dry_run: list[str]
) -> None:
    """A dry run, however it is spelt, and a lint parse the workflow and plan: they leave no
    file of the workflow's own (outputs, stamps, run records, the dataset files' index)."""
    record = workflow.workdir / "record.txt"
    workflow.write_config(recording_config(dataset, record, [DEU, FRA]))
    before = set(workflow.workdir.iterdir())
    workflow.run(*dry_run)
    assert set(workflow.workdir.iterdir()) - before <= {workflow.workdir / ".snakemake"}
    assert not (workflow.workdir / ".snakemake" / "bouquet-eval").exists()


def test_snakemake_keeps_no_input_checksums(workflow: Workflow, dataset: Path) -> None:
    """The workflow decides what is current; Snakemake's checksums of every input, recorded once
    per output after each job, would make a job's cost grow with the square of its directions."""
    workflow.write_config(bounds_config(dataset, shards=1, directions={"list": [DEU, FRA]}))
    workflow.run()
    records = [
        json.loads(path.read_text())
        for path in (workflow.workdir / ".snakemake" / "metadata").iterdir()
    ]
    scored = [record for record in records if record["rule"].startswith("score_")]
    assert scored and all(record["input"] for record in scored)
    assert all(not record["input_checksums"] for record in records)


@pytest.mark.parametrize("profiles", [[], ["--profile", str(REPOSITORY / "profiles" / "slurm")]])
def test_no_input_checksums_whatever_the_profile(
    profiles: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workflow's own profile applies from any working directory, beside a cluster one."""
    from snakemake.cli import parse_args

    monkeypatch.chdir(tmp_path)
    _, arguments = parse_args(["--snakefile", str(SNAKEFILE), "--cores", "2", *profiles])
    assert arguments.max_checksum_file_size == 0
