"""What people look at: leaderboard, report, submission, verification and the MTME export.

The workflow tests share one real run of the sample (two models) in a scratch directory.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import sys
import tarfile
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
import yaml

from bouquet_eval.data.dataset import Direction
from bouquet_eval.metrics.records import MetricSet, record_of
from bouquet_eval.results.extracts import EXTRACT_FILE
from bouquet_eval.results.leaderboard import (
    MISSING,
    ModelResults,
    build_leaderboard,
    markdown_table,
    primary_metric,
    write_leaderboard,
)
from bouquet_eval.results.mtme import documents, escape, unescape
from bouquet_eval.results.pages import leaderboard_page
from bouquet_eval.results.verify import (
    DIFFERS,
    NOT_CLAIMED,
    NOT_RECOMPUTED,
    OK,
    compare_scores,
    mismatch_message,
    what_was_checked,
)
from bouquet_eval.translators.backends import bounds

from .conftest import SAMPLE, Workflow, files_under
from .hostile_archives import GIB, Zeros, folder_members, member, write_archive
from .hub_datasets import bouquet_on_hub
from .hub_server import HubServer
from .leaderboard_models import SMALL, synthetic_model
from .mtme_reader import read_language_pair
from .workflow_configs import SMALL_JOBS


def test_leaderboard_ranks_intervals_breakdown_and_clusters() -> None:
    results = [
        synthetic_model("worse", shift=-8, noise=1, seed=1),
        synthetic_model("best", shift=0, noise=1, seed=2),
        synthetic_model("tied", shift=-0.05, noise=1, seed=3),
    ]
    board = build_leaderboard(results, ["chrfpp"], {"metricx"}, SMALL)
    assert board["model"].tolist() == ["best", "tied", "worse"]
    assert board["rank"].tolist() == [1, 2, 3]
    assert board["cluster"].tolist() == [1, 1, 2]
    assert np.isnan(board["p_vs_best"].iloc[0])
    assert board["p_vs_best"].iloc[1] >= 0.05 > board["p_vs_best"].iloc[2]
    by_name = {r.name: r for r in results}
    for record in board.to_dict(orient="records"):
        scores = by_name[record["model"]].scores
        assert record["chrfpp"] == pytest.approx(scores["chrfpp"].mean())
        assert record["chrfpp_ci_low"] < record["chrfpp"] < record["chrfpp_ci_high"]
        assert record["n_directions"] == 3 and record["n_sentences"] == 120
        # One direction each: into English, out of English, neither.
        by_direction = scores.set_index(["src_lang", "tgt_lang"])["chrfpp"]
        assert record["chrfpp_into_english"] == by_direction[("fra_Latn", "eng_Latn")]
        assert record["chrfpp_out_of_english"] == by_direction[("eng_Latn", "fra_Latn")]
        assert record["chrfpp_without_english"] == by_direction[("fra_Latn", "deu_Latn")]
    table = markdown_table(board, {"metricx"})
    assert "| 1 | best | 1 | 3 | 120 |" in table and "chrfpp ↑" in table


def test_metricx_ranks_lower_first_and_the_composite_comes_first() -> None:
    assert primary_metric(["chrfpp", "metricx", "glotlid_x_metricx"]) == "glotlid_x_metricx"
    assert primary_metric(["chrfpp", "metricx"]) == "metricx"
    assert primary_metric(["chrfpp"]) == "chrfpp"
    results = [
        synthetic_model("worse", shift=-8, noise=1, seed=1),
        synthetic_model("best", shift=0, noise=1, seed=2),
    ]
    board = build_leaderboard(results, ["chrfpp", "metricx"], {"metricx"}, SMALL)
    assert board.attrs["primary"] == "metricx"
    assert board["model"].tolist() == ["best", "worse"]
    assert board["metricx"].iloc[0] < board["metricx"].iloc[1]
    assert "metricx ↓" in markdown_table(board, {"metricx"})


def test_a_target_ranks_by_distance_to_it() -> None:
    """A column whose record declares its best value (a length ratio's 1): the models closest
    to it first, and clustered by their distances (equally far above and below: one
    cluster), where higher-is-better would rank the farthest first."""
    center = synthetic_model("center", shift=0, noise=0, seed=0)
    target = float(center.scores["chrfpp"].mean())
    results = [
        synthetic_model("far", shift=8, noise=1, seed=1),
        synthetic_model("above", shift=1, noise=1, seed=2),
        synthetic_model("below", shift=-1, noise=1, seed=3),
    ]
    plain = build_leaderboard(results, ["chrfpp"], set(), SMALL)
    assert plain["model"].iloc[0] == "far" and plain["cluster"].tolist() == [1, 2, 3]
    board = build_leaderboard(results, ["chrfpp"], set(), SMALL, targets={"chrfpp": target})
    assert set(board["model"].iloc[:2]) == {"above", "below"} and board["model"].iloc[2] == "far"
    distance = (board["chrfpp"] - target).abs()
    assert distance.is_monotonic_increasing and board["rank"].tolist() == [1, 2, 3]
    assert board["cluster"].tolist() == [1, 1, 2]
    assert board["p_vs_best"].iloc[1] >= 0.05 > board["p_vs_best"].iloc[2]
    table = markdown_table(board, set())
    assert f"chrfpp →{target:g}" in table and f"(closest to {target:g} is best)" in table
    page = leaderboard_page(board, set())
    assert f"<th>chrfpp →{target:g}</th>" in page and f"(closest to {target:g} is best)" in page
    # A metric of one's own declares it as the records do.
    assert record_of("own", OwnMetric()).targets == {"ratio": 1.0}
    assert MetricSet.of(["chrf", "metricx", "glotlid"], {}).decimals() == {
        "chrfpp": 2,
        "metricx": 2,
        "glotlid_score": 3,
        "glotlid_x_metricx": 3,
    }


class OwnMetric:
    """A length ratio."""

    name = "own"
    columns = ("ratio",)
    targets: ClassVar[dict[str, float]] = {"ratio": 1.0}
    decimals = 2


def test_models_on_other_directions_are_marked_not_ranked() -> None:
    partial = synthetic_model("partial", shift=20, noise=1, seed=4)
    kept = partial.scores["tgt_lang"] != "deu_Latn"
    partial = ModelResults("partial", partial.scores[kept], partial.rows)
    results = [
        synthetic_model("a", shift=0, noise=1, seed=1),
        synthetic_model("b", shift=-8, noise=1, seed=2),
        partial,
    ]
    board = build_leaderboard(results, ["chrfpp"], set(), SMALL)
    # Its higher mean over fewer directions does not put it first.
    assert board["model"].tolist() == ["a", "b", "partial"]
    last = board.iloc[-1]
    assert not last["comparable"] and pd.isna(last["rank"]) and pd.isna(last["cluster"])
    assert "2 directions, 2 of them shared with the 3" in last["note"]
    assert "partial *" in markdown_table(board, set())


def test_reference_points_are_bounds_not_ranked(tmp_path: Path) -> None:
    """The references as output would always be first: every model's p vs best would be
    against them."""
    results = [
        synthetic_model("reference", shift=30, noise=0.1, seed=1),
        synthetic_model("model-a", shift=0, noise=1, seed=2),
        synthetic_model("copy", shift=-30, noise=0.1, seed=3),
        synthetic_model("model-b", shift=-0.05, noise=1, seed=4),
    ]
    found = bounds(
        [{"name": "reference", "translator": "reference"},
         {"name": "copy", "translator": "copy-source"},
         {"name": "model-a", "translator": "vllm"}, {"name": "model-b", "translator": "x:Y"}]
    )  # fmt: skip
    assert found == {"reference": "upper", "copy": "lower"}
    board = build_leaderboard(results, ["chrfpp"], set(), SMALL, found)
    assert board["model"].tolist() == ["model-a", "model-b", "copy", "reference"]
    assert board["rank"].tolist()[:2] == [1, 2] and board["rank"].iloc[2:].isna().all()
    assert np.isnan(board["p_vs_best"].iloc[0]) and board["p_vs_best"].iloc[1] > 0.05
    assert board["cluster"].tolist()[:2] == [1, 1]
    page = leaderboard_page(board, set())
    assert "upper bound</td>" in page and "lower bound</td>" in page
    # Clusters are integers beside the unranked bounds: in the CSV, the Markdown and the page.
    write_leaderboard(board, tmp_path / "leaderboard.csv", tmp_path / "leaderboard.md", set())
    with (tmp_path / "leaderboard.csv").open(newline="") as written:
        assert [row["cluster"] for row in csv.DictReader(written)] == ["1", "1", "", ""]
    assert "| 1 | model-a | 1 |" in (tmp_path / "leaderboard.md").read_text()
    assert 'class="cluster-1"' in page and "cluster-1.0" not in page


def test_verification_statuses_and_message() -> None:
    claimed = pd.DataFrame(
        {"src_lang": ["eng_Latn"] * 2, "tgt_lang": ["fra_Latn", "deu_Latn"], "n_sentences": [5, 5],
         "chrfpp": [40.0, 50.0], "chrfpp_ci_low": [1.0, 1.0], "metricx": [3.0, 4.0]}
    )  # fmt: skip
    recomputed = claimed.drop(columns=["metricx"]).assign(chrfpp=[40.0, 50.5], chrfpp_ci_low=9.0)
    verification = compare_scores(claimed, recomputed, {"chrfpp": 1e-9})
    status = verification.set_index(["tgt_lang", "metric"])["status"]
    assert status[("fra_Latn", "chrfpp")] == OK
    assert status[("deu_Latn", "chrfpp")] == DIFFERS
    assert status[("deu_Latn", "metricx")] == NOT_RECOMPUTED
    assert "chrfpp_ci_low" not in set(verification["metric"])  # intervals are not claims
    # Nor which learned metrics never saw a direction's languages (scores.csv's `unseen_by`,
    # text that the records, not the claim, decide).
    unseen = claimed.assign(unseen_by=["metricx", ""])
    assert compare_scores(unseen, recomputed, {"chrfpp": 1e-9}).equals(verification)
    # Columns named as the comparison's own never stand for another.
    odd = compare_scores(
        claimed.assign(_merge=1.0, chrfpp_claimed=2.0), recomputed, {"chrfpp": 1e-9}
    ).set_index(["tgt_lang", "metric"])["status"]
    assert odd[("deu_Latn", "chrfpp")] == DIFFERS and odd[("fra_Latn", "chrfpp")] == OK
    assert odd[("fra_Latn", "_merge")] == odd[("fra_Latn", "chrfpp_claimed")] == NOT_RECOMPUTED
    # A claimed metric that this configuration does not recompute fails, unless allowed.
    differs = (
        "model 'm', direction eng_Latn-deu_Latn, chrfpp: claimed 50.0, recomputed 50.5 "
        "(tolerance 1e-09)"
    )
    assert mismatch_message("m", verification, allow_unchecked=True) == differs
    assert mismatch_message("m", verification) == "\n".join(
        [
            differs,
            *(
                f"model 'm', direction eng_Latn-{tgt}, metricx: claimed {value}, not "
                "recomputed: this configuration does not compute it (add its metric to "
                "metrics, or allow it with verify.allow_unchecked_claims)"
                for tgt, value in (("deu_Latn", 4.0), ("fra_Latn", 3.0))
            ),
        ]
    )
    assert what_was_checked(verification) == (
        "checked chrfpp, n_sentences in 2 directions; not checked (this configuration does "
        "not recompute them): metricx"
    )


def test_mtme_escaping_and_documents() -> None:
    text = 'two\nlines, a \\n literal, a tab\tand "quotes"\r'
    assert "\n" not in escape(text) and "\r" not in escape(text)
    assert unescape(escape(text)) == text
    rows = pd.DataFrame(
        {
            "uniq_id": ["a", "b", "c"],
            "domain": ["chat", "chat", "news"],
            "par_id": ["p1", "p1", "p2"],
        }
    )
    assert documents(rows) == ["chat p1", "chat p1", "news p2"]
    scattered = rows.assign(par_id=["p1", "p2", "p1"])  # not contiguous: one per segment
    assert documents(scattered) == ["chat a", "chat b", "news c"]


# --- Through the workflow -------------------------------------------------------------------

MODELS = ["copy-source", "reference"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Workflow:
    """The sample through `all`, `submission` and `mtme` (the report of a run, with text that
    would run if a page took it for markup, in tests/test_pages.py)."""
    root = tmp_path_factory.mktemp("results")
    dataset = root / "dataset"
    shutil.copytree(SAMPLE, dataset)
    workflow = Workflow(root / "work")
    workflow.workdir.mkdir()
    workflow.write_config(
        {
            "dataset": {"path": str(dataset)},
            "output_dir": "runs",
            "shards": 1,
            "limit": 12,
            "resources": SMALL_JOBS,
            "statistics": {"bootstrap_resamples": 200, "ar_trials": 200},
            "models": [{"name": name, "translator": name} for name in MODELS],
        }
    )
    workflow.run("all", "submission", "mtme")
    return workflow


def test_leaderboard_through_the_workflow(run: Workflow) -> None:
    runs = run.workdir / "runs"
    board = pd.read_csv(runs / "leaderboard.csv")
    # Two reference points and no model: nothing is ranked, both are shown as bounds.
    assert board["model"].tolist() == ["copy-source", "reference"]
    assert board["bound"].tolist() == ["lower", "upper"]
    assert board["rank"].isna().all() and board["cluster"].isna().all()
    for record in board.to_dict(orient="records"):
        scores = pd.read_csv(runs / record["model"] / "scores.csv")
        assert record["n_directions"] == len(scores) == 20
        assert record["n_sentences"] == scores["n_sentences"].sum() == 240
        assert record["chrfpp"] == pytest.approx(scores["chrfpp"].mean())
    assert board["chrfpp"].iloc[1] == pytest.approx(100)
    markdown = (runs / "leaderboard.md").read_text(encoding="utf-8")
    assert f"| {MISSING} | reference * | {MISSING} | 20 | 240 | 100.00 [100.00, 100.00]" in markdown
    assert "reference: a reference point, the upper bound, not ranked" in markdown


def test_the_report_reads_each_models_extract(run: Workflow) -> None:
    """Each model's aggregation extracts its sentences for the report; the leaderboard job
    makes the distributions and sentences pages from the extracts, not from every row."""
    for model in MODELS:
        assert (run.workdir / "runs" / model / EXTRACT_FILE).is_file()
    log = (run.workdir / "logs" / "leaderboard.log").read_text(encoding="utf-8")
    assert "made from the models' extracts" in log
    assert "made from the rows" not in log


def test_submission_holds_what_the_leaderboard_asks(run: Workflow) -> None:
    folder = run.workdir / "runs" / "submission" / "copy-source"
    names = sorted(path.name for path in folder.iterdir())
    expected = ["COMMANDS.txt", "EVAL_RESULTS.txt", "SHA256SUMS", "manifest.json", "scores.csv"]
    assert [n for n in names if not n.endswith(".jsonl")] == expected
    # No Hugging Face eval result: a sample run is not BOUQuET's, and it says why.
    note = (folder / "EVAL_RESULTS.txt").read_text()
    assert note.startswith("No Hugging Face eval results for 'copy-source'")
    assert "- the dataset was read from a local folder (dataset.path)" in note
    assert "- limit: 12 sentences per direction" in note
    assert "- 'copy-source' is a reference point (translator: copy-source)" in note
    assert str(run.workdir) not in note and str(SAMPLE.parent) not in note
    log = (run.workdir / "logs" / "copy-source" / "submission.log").read_text()
    assert "No Hugging Face eval results for 'copy-source'" in log
    assert len([n for n in names if n.endswith(".jsonl")]) == 20
    checked = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        checked[name] = digest
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest
    assert sorted(checked) == [n for n in names if n != "SHA256SUMS"]
    commands = (folder / "COMMANDS.txt").read_text()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert " ".join(manifest["entries"][-1]["command"]) in commands
    with tarfile.open(folder.parent / "copy-source.tar.gz") as archive:
        members = {}
        for member in archive:
            if member.isfile():
                extracted = archive.extractfile(member)
                assert extracted is not None
                members[member.name] = extracted.read()
    assert members == {f"copy-source/{n}": (folder / n).read_bytes() for n in names}


def test_a_full_run_at_a_pinned_commit_has_eval_results_per_metric(
    workflow: Workflow, dataset: Path, tmp_path: Path
) -> None:
    """BOUQuET's whole test split (the sample, as the Hub stand-in serves it) at a pinned commit:
    one eval-results file per metric, which huggingface_hub reads back with each metric told
    apart by its task id, at that commit (a reference point has none: the sample run's test)."""
    from huggingface_hub import parse_eval_result_entries

    mine = tmp_path / "mine"
    mine.mkdir()
    for path in sorted(SAMPLE.glob("*.parquet")):
        rows = pd.read_parquet(path).rename(columns={"tgt_text": "ref_text"})
        rows["mt_text"] = rows["ref_text"].str.upper()
        rows.to_json(mine / f"{path.stem}.jsonl", orient="records", lines=True, force_ascii=False)
    with HubServer() as hub:
        bouquet = bouquet_on_hub(hub, dataset)
        hub.grant("hf_reader", bouquet)
        commit = bouquet.branches["main"]
        workflow.write_config(
            {
                "dataset": {"name": "facebook/bouquet", "revision": commit},
                "output_dir": "runs",
                "shards": 1,
                "metrics": ["chrf", "bleu", "ter"],
                "resources": SMALL_JOBS,
                "statistics": {"bootstrap_resamples": 20},
                "models": [{"name": "mine", "translator": "provided", "path": str(mine)}],
            }
        )
        workflow.run("submission", env=hub.environment(tmp_path / "hf", token="hf_reader"))
    folder = workflow.workdir / "runs" / "submission" / "mine"
    summary = pd.read_csv(workflow.workdir / "runs" / "mine" / "summary.csv")
    overall = summary.set_index("group_by").loc["all"]
    assert overall["n_directions"] == len(list(SAMPLE.glob("*.parquet"))) == 20
    files = sorted(folder.glob("eval_results_*.yaml"))
    assert [path.name for path in files] == [
        "eval_results_bleu.yaml",
        "eval_results_chrfpp.yaml",
        "eval_results_ter.yaml",
    ]
    entries = {}
    for path in files:
        (entry,) = parse_eval_result_entries(yaml.safe_load(path.read_text()))
        entries[entry.task_id] = entry
    assert sorted(entries) == [f"benchmark_sentence_level_{c}" for c in ("bleu", "chrfpp", "ter")]
    signatures = json.loads((folder / "manifest.json").read_text())["entries"][-1]["metrics"]
    metric = {"bleu": "bleu", "chrfpp": "chrf", "ter": "ter"}
    for column, entry in zip(("bleu", "chrfpp", "ter"), entries.values(), strict=True):
        assert entry.dataset_id == "facebook/bouquet" and entry.dataset_revision == commit
        assert entry.value == overall[column]
        better = "lower" if column == "ter" else "higher"
        assert entry.notes is not None and entry.notes.startswith(f"{column} ({better} is better)")
        assert entry.notes.endswith(f"signature {signatures[metric[column]]}")
    note = (folder / "EVAL_RESULTS.txt").read_text()
    assert f"at commit {commit}" in note and "eval_results_chrfpp.yaml" in note


def test_verify_passes_then_names_what_differs(run: Workflow) -> None:
    run.run("verify")
    runs = run.workdir / "runs"
    for model in MODELS:
        verification = pd.read_csv(runs / model / "verification.csv")
        assert set(verification["status"]) == {OK}
        assert {"n_sentences", "chrfpp", "chrfpp_corpus"} == set(verification["metric"])
        assert len(verification) == 3 * 20

    scores_path = runs / "copy-source" / "scores.csv"
    original = scores_path.read_bytes()
    claimed = pd.read_csv(scores_path)
    claimed.loc[claimed["tgt_lang"] == "fra_Latn", "chrfpp"] += 0.001
    claimed.to_csv(scores_path, index=False)
    try:
        failed = run.run("verify", check=False)
    finally:
        scores_path.write_bytes(original)
    assert failed.returncode != 0
    output = failed.stdout + failed.stderr
    tampered = float(claimed.set_index(["src_lang", "tgt_lang"])["chrfpp"]["eng_Latn", "fra_Latn"])
    verification = pd.read_csv(runs / "copy-source" / "verification.csv")
    differing = verification[verification["status"] == DIFFERS]
    assert (differing["tgt_lang"] == "fra_Latn").all() and set(differing["metric"]) == {"chrfpp"}
    recomputed = float(differing.set_index("src_lang")["recomputed"]["eng_Latn"])
    assert recomputed == pytest.approx(tampered - 0.001)
    assert (
        f"model 'copy-source', direction eng_Latn-fra_Latn, chrfpp: claimed {tampered!r}, "
        f"recomputed {recomputed!r}" in output
    )


def maintainer(run: Workflow, root: Path) -> Workflow:
    """A leaderboard maintainer's working directory and configuration, their own: the same
    dataset and settings as the run, none of its models."""
    workflow = Workflow(root / "maintainer")
    workflow.workdir.mkdir(parents=True)
    workflow.write_config(
        {
            "dataset": {"path": str(run.workdir.parent / "dataset")},
            "output_dir": "runs",
            "limit": 12,
            "resources": SMALL_JOBS,
            "statistics": {"bootstrap_resamples": 200, "ar_trials": 200},
            "models": [{"name": "baseline", "translator": "reference"}],
        }
    )
    return workflow


def received(run: Workflow, folder: Path, name: str = "copy-source") -> Path:
    """A copy of the run's submission of copy-source, as `folder`/`name`."""
    copy = folder / name
    shutil.copytree(run.workdir / "runs" / "submission" / "copy-source", copy)
    return copy


def verified(workflow: Workflow, *submissions: Path, check: bool = False):
    listed = ", ".join(str(path) for path in submissions)
    return workflow.run(
        "verify", "--keep-going", "--config", f"submissions=[{listed}]", check=check
    )


def test_a_hostile_submission_is_read_as_data_only(run: Workflow, tmp_path: Path) -> None:
    """A submission that brings a configuration (a YTE expression that runs a command, a
    loosened tolerance, its own references as the dataset), its own dataset folder and a
    claim inflated by 10 is verified with the maintainer's configuration: nothing of it runs,
    every file not read is named, and the claim fails."""
    workflow = maintainer(run, tmp_path)
    hostile = received(run, tmp_path / "inbox")
    marker = tmp_path / "ran"
    # Its own references: the model's translations (the source, for copy-source).
    own = hostile / "dataset"
    shutil.copytree(run.workdir.parent / "dataset", own)
    for path in own.glob("*.parquet"):
        frame = pd.read_parquet(path)
        frame["tgt_text"] = frame["src_text"]
        frame.to_parquet(path)
    (hostile / "config.yaml").write_text(
        "__use_yte__: true\n"
        f"limit: ?__import__('os').system('touch {marker}') or 12\n"
        "verify:\n  tolerance:\n    chrfpp: 1000\n    chrfpp_corpus: 1000\n"
        f"dataset:\n  path: {own}\n",
        encoding="utf-8",
    )
    (hostile / "link.jsonl").symlink_to(hostile / "eng_Latn-fra_Latn.jsonl")
    scores = hostile / "scores.csv"
    claim = pd.read_csv(scores)
    claim[["chrfpp", "chrfpp_corpus"]] += 10
    claim.to_csv(scores, index=False)

    failed = verified(workflow, hostile)
    assert failed.returncode != 0
    assert not marker.exists()
    assert (
        f"submission '{hostile}' (model 'copy-source'): 'COMMANDS.txt', 'EVAL_RESULTS.txt', "
        "'SHA256SUMS', 'config.yaml', 'manifest.json' not read (a submission brings data only: "
        "it is verified with this configuration)"
    ) in failed.stderr
    assert (
        "'dataset', 'link.jsonl' not read (not a plain file at the top of its folder)"
        in failed.stderr
    )
    verification = pd.read_csv(
        workflow.workdir / "runs" / "received" / "copy-source" / "verification.csv"
    )
    differing = verification[verification["status"] == DIFFERS]
    assert set(differing["metric"]) == {"chrfpp", "chrfpp_corpus"} and len(differing) == 2 * 20
    assert set(differing["tolerance"]) == {1e-9}  # the maintainer's, not the submission's


def test_an_archive_is_read_without_unpacking_what_it_names(run: Workflow, tmp_path: Path) -> None:
    """A .tar.gz is verified as received; a member that climbs out of its folder, or is a link,
    is named and never written anywhere."""
    workflow = maintainer(run, tmp_path)
    folder = received(run, tmp_path / "packing")
    archive = tmp_path / "inbox" / "copy-source.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="copy-source")
        tar.add(folder / "scores.csv", arcname="copy-source/../escaped.csv")
        link = tarfile.TarInfo("copy-source/eng_Latn-deu_Latn.jsonl.link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    result = verified(workflow, archive, check=True)
    assert (
        "'copy-source/../escaped.csv', 'copy-source/eng_Latn-deu_Latn.jsonl.link' not read"
        in result.stderr
    )
    assert not list(tmp_path.rglob("escaped.csv"))
    verification = pd.read_csv(
        workflow.workdir / "runs" / "received" / "copy-source" / "verification.csv"
    )
    assert set(verification["status"]) == {OK} and len(verification) == 3 * 20


# Runs a command and prints, last, the largest resident set of its process tree (in KiB).
PEAK_MEMORY = (
    sys.executable,
    "-c",
    "import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
    "print('peak', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(code)",
)


def test_hostile_archives_are_refused_in_moments_and_honest_ones_pass(
    run: Workflow, tmp_path: Path
) -> None:
    """A bomb is refused while Snakemake plans, in one line, within 1 GiB; an honest
    archive whose claim has a byte-order mark and CRLF line ends, with links and names that
    hold terminal escapes among its files, passes, and says what it checked; a claim of a
    metric not recomputed fails, unless allowed: nothing is written
    outside the maintainer's folders. (Every other hostile archive, 100,000 members among them,
    is tested on the reading functions in test_outside_inputs.py.)"""
    workflow = maintainer(run, tmp_path)
    folder = received(run, tmp_path / "packing")
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    bomb = write_archive(
        inbox / "bomb.tar.gz",
        [*folder_members(folder, "bomb"), member("bomb/eng_Latn-fra_Latn.jsonl", Zeros(GIB))],
    )
    # How long it takes is the reading function's test (test_outside_inputs.py): here the
    # run's own start, seconds or minutes on a loaded machine, would be timed too.
    refused = workflow.run(
        "verify", "--config", f"submissions=[{bomb}]", check=False, prefix=PEAK_MEMORY
    )
    assert refused.returncode != 0
    (line,) = [line for line in refused.stderr.splitlines() if "; refused" in line]
    assert line.startswith(f"bouquet-eval: submission '{bomb}', member ")
    assert (
        "member 'bomb/eng_Latn-fra_Latn.jsonl': 1.0 GiB unpacked, over the limit of 64.0 MiB a "
        "file (verify.limits.member_mib); refused"
    ) in line
    peak = int(refused.stderr.rsplit("peak ", 1)[1])
    assert peak < 1 << 20, f"{peak} KiB"
    assert not (workflow.workdir / "runs").exists()

    claim = (folder / "scores.csv").read_text(encoding="utf-8")
    (folder / "scores.csv").write_bytes(("\ufeff" + claim.replace("\n", "\r\n")).encode("utf-8"))
    honest = [
        *folder_members(folder, "copy-source"),
        member("copy-source/\x1b]0;pwned\x07.txt", b"x"),
        member("copy-source/x\r\nbouquet-eval: every claimed value reproduced", b"x"),
        member("copy-source/eng_Latn-fra_Latn.jsonl.link", kind=tarfile.SYMTYPE, linkname="/"),
    ]
    archive = write_archive(inbox / "copy-source.tar.gz", honest)
    # A claim of a metric the maintainer does not compute: passes where allowed, as unchecked.
    (folder / "scores.csv").write_text(
        claim.replace("\n", ",99.0\n").replace("chrfpp_corpus,99.0", "chrfpp_corpus,bleu"),
        encoding="utf-8",
    )
    unchecked = received(run, tmp_path / "unchecked", "with-bleu")
    shutil.copyfile(folder / "scores.csv", unchecked / "scores.csv")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before = files_under(tmp_path)
    submissions = f"submissions=[{archive}, {unchecked}]"
    failed = workflow.run(
        "verify", "--config", submissions, env={"TMPDIR": str(scratch)}, check=False
    )
    assert failed.returncode != 0
    assert (
        "model 'with-bleu', direction arb_Arab-eng_Latn, bleu: claimed 99.0, not recomputed: "
        "this configuration does not compute it (add its metric to metrics, or allow it with "
        "verify.allow_unchecked_claims)"
    ) in failed.stderr
    # Allowed, only the verdict is redone: the verifications are current.
    passed = workflow.run(
        "verify",
        "--config",
        submissions,
        "verify={allow_unchecked_claims: true}",
        env={"TMPDIR": str(scratch)},
    )
    work = workflow.workdir
    kept = (work / "runs", work / "logs", work / ".snakemake")
    written = files_under(tmp_path) - before
    assert all(any(f in path.parents for f in kept) for path in written), sorted(written)
    assert not list(scratch.iterdir())  # the unpacked files are gone
    assert "\x1b" not in passed.stderr + passed.stdout and "\r" not in passed.stderr
    assert "'\\x1b]0;pwned\\x07.txt'" in passed.stderr
    log = (work / "logs" / "verify.log").read_text(encoding="utf-8")
    assert (
        "model 'copy-source': every value checked reproduced; checked chrfpp, chrfpp_corpus, "
        "n_sentences in 20 directions"
    ) in log
    assert (
        "model 'with-bleu': every value checked reproduced; checked chrfpp, chrfpp_corpus, "
        "n_sentences in 20 directions; not checked (this configuration does not recompute "
        "them): bleu"
    ) in log


def test_a_direction_outside_the_dataset_is_refused(run: Workflow, tmp_path: Path) -> None:
    workflow = maintainer(run, tmp_path)
    hostile = received(run, tmp_path / "inbox")
    claim = pd.read_csv(hostile / "scores.csv")
    claim.loc[3, "src_lang"] = "../dataset/eng_Latn"
    claim.to_csv(hostile / "scores.csv", index=False)
    failed = verified(workflow, hostile)
    assert failed.returncode != 0
    direction = f"../dataset/eng_Latn-{claim.loc[3, 'tgt_lang']}"
    assert (
        f"submission '{hostile}', member 'scores.csv', line 5: direction {direction!r} is not "
        "a direction of the dataset; refused"
    ) in failed.stderr
    assert not (workflow.workdir / "runs" / "received").exists()  # refused before any job


def _edit_line(path: Path, number: int, **fields) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[number] = json.dumps({**json.loads(lines[number]), **fields})
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _edit_lines(path: Path, edit) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(edit(lines)) + "\n", encoding="utf-8")


def _edit_claim(folder: Path, edit) -> None:
    claim = pd.read_csv(folder / "scores.csv")
    edit(claim).to_csv(folder / "scores.csv", index=False)


FRA = "eng_Latn-fra_Latn.jsonl"
_IS_FRA = "(src_lang == 'eng_Latn') & (tgt_lang == 'fra_Latn')"
# Each way of tampering with a submission, and what its verification says (in its
# verification.csv: a value that differs or is not claimed; else in its job's log).
TAMPERING = {
    "mean-raised": (
        lambda f: _edit_claim(f, lambda c: c.assign(chrfpp=c["chrfpp"] + 1e-3)),
        "differs",
    ),
    "corpus-raised": (
        lambda f: _edit_claim(f, lambda c: c.assign(chrfpp_corpus=c["chrfpp_corpus"] + 0.5)),
        "differs",
    ),
    "count-changed": (
        lambda f: _edit_claim(f, lambda c: c.assign(n_sentences=c["n_sentences"] + 1)),
        "differs",
    ),
    "value-missing": (lambda f: _edit_claim(f, lambda c: c.assign(chrfpp=np.nan)), "differs"),
    "direction-dropped": (
        lambda f: _edit_claim(f, lambda c: c.query(f"not ({_IS_FRA})")),
        "not claimed",
    ),
    "metric-dropped": (
        lambda f: _edit_claim(f, lambda c: c.drop(columns=["chrfpp_corpus"])),
        "not claimed",
    ),
    # Not recomputed by the maintainer's configuration, so not checked: fails unless allowed.
    "metric-unchecked": (lambda f: _edit_claim(f, lambda c: c.assign(bleu=99.0)), NOT_RECOMPUTED),
    "translation-edited": (lambda f: _edit_line(f / FRA, 0, mt_text="un autre texte"), "differs"),
    "source-edited": (
        lambda f: _edit_line(f / FRA, 0, src_text="another source"),
        "src_text differs from the dataset's sentence",
    ),
    "reference-edited": (
        lambda f: _edit_line(f / FRA, 0, ref_text="another reference"),
        "ref_text differs from the dataset's sentence",
    ),
    "lines-swapped": (
        lambda f: _edit_lines(f / FRA, lambda lines: [lines[1], lines[0], *lines[2:]]),
        "lines must follow the dataset's order",
    ),
    "line-dropped": (
        lambda f: _edit_lines(f / FRA, lambda lines: lines[:-1]),
        "one line per sentence",
    ),
    "line-not-json": (
        lambda f: _edit_lines(f / FRA, lambda lines: ["{not json", *lines[1:]]),
        f"member '{FRA}', line 1, column",
    ),
    "file-missing": (
        lambda f: (f / FRA).unlink(),
        f"member '{FRA}': not found, so direction eng_Latn-fra_Latn cannot be verified",
    ),
    "other-direction": (
        lambda f: shutil.copyfile(f / "eng_Latn-deu_Latn.jsonl", f / FRA),
        "tgt_lang is 'deu_Latn', expected 'fra_Latn'",
    ),
}


def test_every_tampering_is_caught(run: Workflow, tmp_path: Path) -> None:
    workflow = maintainer(run, tmp_path)
    folders = []
    for name, (tamper, _) in TAMPERING.items():
        folders.append(received(run, tmp_path / "inbox", name))
        tamper(folders[-1])
    failed = verified(workflow, *folders)
    assert failed.returncode != 0
    for name, (_, evidence) in TAMPERING.items():
        outputs = workflow.workdir / "runs" / "received" / name
        if evidence in (DIFFERS, NOT_CLAIMED, NOT_RECOMPUTED):
            verification = pd.read_csv(outputs / "verification.csv")
            assert evidence in set(verification["status"]), name
        else:
            assert not (outputs / "verification.csv").exists(), name
            log = workflow.workdir / "logs" / "received" / name / "verify.log"
            (failure,) = [
                line
                for line in log.read_text(encoding="utf-8").splitlines()
                if "job failed: " in line
            ]
            # The submission and its member are named, never where the job unpacked it.
            assert evidence in failure, name
            assert f"submission '{tmp_path / 'inbox' / name}' (model '{name}'), member " in failure
            assert "received-" not in failure


def test_mtme_export_loads_as_evalsets(run: Workflow) -> None:
    runs = run.workdir / "runs"
    test_set = runs / "mtme" / "bouquet"
    scores = {m: pd.read_csv(runs / m / "scores.csv") for m in MODELS}
    rows = pd.read_parquet(runs / "copy-source" / "scored_rows.parquet")
    for path in sorted((test_set / "sources").glob("*.txt")):
        lp = path.stem
        direction = Direction.parse(lp)
        pair = read_language_pair(test_set, lp)
        assert len(pair.src) == 12
        assert set(pair.refs) == {"refA"} and set(pair.systems) == set(MODELS)
        assert [unescape(t) for t in pair.systems["reference"]] == [
            unescape(t) for t in pair.refs["refA"]
        ]
        assert set(pair.scores["seg"]) == set(pair.scores["sys"]) == {"chrfpp-refA"}
        mine = rows[
            (rows["src_lang"] == direction.src_lang) & (rows["tgt_lang"] == direction.tgt_lang)
        ]
        assert pair.scores["seg"]["chrfpp-refA"]["copy-source"] == mine["chrfpp"].tolist()
        for model in MODELS:
            expected = (
                scores[model]
                .set_index(["src_lang", "tgt_lang"])
                .loc[(direction.src_lang, direction.tgt_lang), "chrfpp_corpus"]
            )
            assert pair.scores["sys"]["chrfpp-refA"][model] == [pytest.approx(expected)]
    assert len(list((test_set / "sources").glob("*.txt"))) == 20


@pytest.mark.parametrize(("column", "lower"), [("chrfpp", set()), ("metricx", {"metricx"})])
def test_heatmap_values_stay_readable_on_bright_and_dark_cells(
    column: str, lower: set[str]
) -> None:
    import xml.etree.ElementTree as ElementTree

    from bouquet_eval.results.figures import heatmap

    good, bad = (1.0, 20.0) if lower else (95.0, 5.0)
    scores = pd.DataFrame(
        {"src_lang": ["eng_Latn", "fra_Latn"], "tgt_lang": ["fra_Latn", "eng_Latn"],
         column: [good, bad]}
    )  # fmt: skip
    svg = ElementTree.fromstring(heatmap(scores, column, "m", lower))
    names = "{http://www.w3.org/2000/svg}"
    # A square per evaluated direction, named in its tooltip, and its value on it.
    tips = [str(title.text) for title in svg.iter(f"{names}title")]
    arrow = "\N{RIGHTWARDS ARROW}"
    expected = [f"eng_Latn {arrow} fra_Latn: {good:.2f}", f"fra_Latn {arrow} eng_Latn: {bad:.2f}"]
    assert sorted(tips) == sorted(expected)
    colours = {
        float(text.text): text.get("fill")
        for text in svg.iter(f"{names}text")
        if text.get("fill") and text.text and text.text[0].isdigit()
    }
    # The best cell is the bright end of the scale, the worst the dark end.
    assert colours == {good: "black", bad: "white"}


def test_a_heatmap_of_a_column_with_a_target_is_lightest_at_it() -> None:
    """Closest to the target is best: the target the light middle of a diverging scale (matplotlib's
    RdBu, the oracle), equal distances above and below it equally far from the middle."""
    import xml.etree.ElementTree as ElementTree

    import matplotlib

    from bouquet_eval.results.figures import heatmap

    values = {("eng_Latn", "fra_Latn"): 1.0, ("fra_Latn", "eng_Latn"): 1.6,
              ("eng_Latn", "deu_Latn"): 0.4, ("deu_Latn", "eng_Latn"): 1.3}  # fmt: skip
    scores = pd.DataFrame(
        [{"src_lang": s, "tgt_lang": t, "ratio": v} for (s, t), v in values.items()]
    )
    svg = ElementTree.fromstring(heatmap(scores, "ratio", "m", set(), {"ratio": 1.0}))
    names = "{http://www.w3.org/2000/svg}"
    arrow = "\N{RIGHTWARDS ARROW}"

    def rgb(colour: str) -> np.ndarray:
        return np.asarray(matplotlib.colors.to_rgb(colour))

    cells = {
        str(rect.find(f"{names}title").text): rgb(str(rect.get("fill")))  # type: ignore[union-attr]
        for rect in svg.iter(f"{names}rect")
        if rect.find(f"{names}title") is not None
    }
    diverging = matplotlib.colormaps["RdBu"]
    # The scale reaches as far below the target as above it: 0.4 to 1.6.
    for (source, target), value in values.items():
        expected = np.asarray(diverging((value - 0.4) / 1.2))[:3]
        assert np.abs(cells[f"{source} {arrow} {target}: {value:.2f}"] - expected).max() < 3 / 255
    texts = [text for text in svg.iter(f"{names}text") if text.text]
    on_cells = {float(str(t.text)): t.get("fill") for t in texts if t.get("fill")}
    assert on_cells == {1.0: "black", 1.6: "white", 0.4: "white", 1.3: "black"}
    assert any("(closest to 1 is best)" in str(t.text) for t in texts)
    assert {"1.60", "1.00", "0.40"} <= {str(t.text) for t in texts}  # the scale's ends and middle
    # A cell of no direction does not look like one on the target.
    (empty,) = [
        rgb(str(rect.get("fill")))
        for rect in svg.iter(f"{names}rect")
        if rect.find(f"{names}title") is None and str(rect.get("fill")).startswith("#")
    ]
    assert np.abs(np.asarray(diverging(0.5))[:3] - empty).max() > 0.25
