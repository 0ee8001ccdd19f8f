"""The `bouquet-eval` command as a new user runs it: from a folder of their own, with relative
paths, without network, pasting what it prints."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pandas as pd

from .chat_server import ChatServer, answer
from .conftest import SAMPLE, Workflow
from .test_command import command
from .tiny_seq2seq import build_nllb

OFFLINE = {"HF_HUB_OFFLINE": "1"}


def test_every_path_means_what_it_meant_where_it_was_typed(tmp_path: Path) -> None:
    """A local model folder, a translator's file and the dataset, all relative to the folder
    the command is typed in, while the jobs run in the model's output folder."""
    build_nllb(tmp_path / "tiny-nllb")
    shutil.copytree(SAMPLE, tmp_path / "data")
    nllb = {"model": "./tiny-nllb", "device": "cpu", "max_new_tokens": 4}
    command(
        tmp_path, "translate", "--translator",
        "bouquet_eval.translators.hf_seq2seq:NLLBTranslator",
        "--translator-kwargs", json.dumps(nllb), "--directions", "eng_Latn-fra_Latn",
        "--limit", "1", "--dataset-path", "data", "--output-dir", "runs/nllb", "--cores", "1",
        check=True, env=OFFLINE,
    )  # fmt: skip
    assert len(pd.read_json(tmp_path / "runs/nllb/eng_Latn-fra_Latn.jsonl", lines=True)) == 1
    # A translator of one's own, given a file to write beside the command.
    own = ("--translator", "recording:RecordingTranslator",
           "--translator-kwargs", '{"record": "./record.txt"}',
           "--prompt-fn", "recording:tagged_prompt")  # fmt: skip
    command(
        tmp_path, "translate", *own, "--directions", "eng_Latn-fra_Latn", "--limit", "1",
        "--dataset-path", "data", "--output-dir", "runs/mine", "--cores", "1",
        check=True, env=OFFLINE,
    )  # fmt: skip
    assert (tmp_path / "record.txt").read_text().split() == ["LOAD", "eng_Latn-fra_Latn"]
    assert not (tmp_path / "runs" / "mine" / "record.txt").exists()


def copy_source_run(cwd: Path, name: str, *flags: str) -> subprocess.CompletedProcess:
    return command(
        cwd, "run", "--translator", "bouquet_eval.translators.bounds:CopySource",
        "--src-lang", "eng_Latn", "--limit", "2", "--metrics", "chrf",
        "--dataset-path", "data", "--output-dir", f"runs/{name}", "--cores", "1", *flags,
        check=True, env=OFFLINE,
    )  # fmt: skip


def test_browse_the_folder_the_command_printed(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE, tmp_path / "data")
    printed = copy_source_run(tmp_path, "copy").stdout
    folder = re.search(r"^bouquet-eval: results in (\S+)$", printed, re.M)
    assert folder, printed
    browse = subprocess.Popen(
        [*command_line(), "browse", folder.group(1), "--port", "0"],
        cwd=tmp_path, env=Workflow.environment(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert browse.stdout is not None
        address = re.search(r"http://127\.0\.0\.1:\d+/", browse.stdout.readline())
        assert address, browse.stderr.read() if browse.stderr else ""
        with urllib.request.urlopen(f"{address.group(0)}api/directions") as reply:
            directions = json.load(reply)
        assert "copy" in json.dumps(directions)
        with urllib.request.urlopen(
            f"{address.group(0)}api/sentences?direction=eng_Latn-fra_Latn"
        ) as reply:
            rows = json.load(reply)["rows"]
        assert len(rows) == 2 and "mt_text|copy" in rows[0]
    finally:
        browse.terminate()
        browse.communicate()


def command_line() -> list[str]:
    return [sys.executable, "-m", "bouquet_eval"]


def test_the_snakemake_command_of_a_dry_run_works_pasted(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE, tmp_path / "data")
    dry = command(
        tmp_path, "run", "--translator", "bouquet_eval.translators.bounds:CopySource",
        "--src-lang", "eng_Latn", "--limit", "2", "--metrics", "chrf",
        "--dataset-path", "data", "--output-dir", "runs/copy", "-n",
        check=True, env=OFFLINE,
    )  # fmt: skip
    printed = re.search(r"^bouquet-eval: the same with Snakemake: (.+)$", dry.stdout, re.M)
    assert printed, dry.stdout
    arguments = shlex.split(printed.group(1))
    assert arguments[0] == "snakemake"
    assert not (tmp_path / "runs" / "copy" / "bouquet-eval.yaml").exists()
    # Pasted in another folder, without the dry run, as a shell runs it.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def paste(arguments: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", *arguments],
            cwd=elsewhere, env=Workflow.environment(OFFLINE), capture_output=True, text=True,
        )  # fmt: skip

    pasted = paste(arguments)
    assert pasted.returncode == 0, pasted.stderr
    assert "translate_copy_shard0of1" in pasted.stdout
    # The same without --dry-run is the run itself.
    real = paste([argument for argument in arguments if argument != "--dry-run"])
    assert real.returncode == 0, real.stderr
    assert len(pd.read_csv(tmp_path / "runs" / "copy" / "scores.csv")) == 8


def test_an_api_runs_timing_counts_each_directions_requests(tmp_path: Path) -> None:
    """Requests of several directions are in flight together; timing.csv gives each direction
    the requests of its own sentences."""
    shutil.copytree(SAMPLE, tmp_path / "data")
    slow, quick = answer(delay=0.3), answer()
    with ChatServer() as server:
        # The first sentence of each direction is slow to answer: the others' requests overlap.
        first_sentences = {
            pd.read_parquet(path)["src_text"].iloc[0] for path in SAMPLE.glob("eng_Latn-*.parquet")
        }
        server.default = lambda handler, request: (
            slow if any(text in (request.prompt or "") for text in first_sentences) else quick
        )(handler, request)
        command(
            tmp_path, "run", "--backend", "openai", "--model", "gpt-x", "--base-url",
            server.url, "--api-key-env", "MY_KEY", "--concurrency", "16",
            "--src-lang", "eng_Latn", "--limit", "5", "--metrics", "chrf",
            "--dataset-path", "data", "--output-dir", "runs/gpt-x", "--cores", "1",
            check=True, env={**OFFLINE, "MY_KEY": "key-1"},
        )  # fmt: skip
        sent = len(server.chat_requests)
    timing = pd.read_csv(tmp_path / "runs" / "gpt-x" / "timing.csv")
    assert sent == 8 * 5 and timing["requests"].sum() == sent
    assert timing["requests"].tolist() == [5] * 8, timing[["tgt_lang", "requests"]]


def own_run(cwd: Path, name: str, limit: str = "2") -> None:
    """A model of one's own (the reference points are no models to rank)."""
    kwargs = json.dumps({"record": str(cwd / f"{name}.txt"), "suffix": f" {name}"})
    command(
        cwd, "run", "--translator", "recording:RecordingTranslator", "--translator-kwargs",
        kwargs, "--prompt-fn", "recording:tagged_prompt", "--src-lang", "eng_Latn",
        "--limit", limit, "--metrics", "chrf", "--dataset-path", "data",
        "--output-dir", f"runs/{name}", "--cores", "1",
        check=True, env=OFFLINE,
    )  # fmt: skip


def test_a_leaderboard_and_a_report_across_the_commands_runs(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE, tmp_path / "data")
    own_run(tmp_path, "first")
    own_run(tmp_path, "second")
    runs = tmp_path / "runs"
    scored = {path: path.stat().st_mtime_ns for path in runs.glob("*/*.scored.parquet")}
    ranked = command(tmp_path, "leaderboard", "runs", "--cores", "1", check=True, env=OFFLINE)
    board = pd.read_csv(runs / "leaderboard.csv")
    assert sorted(board["model"]) == ["first", "second"]
    assert (runs / "report.html").stat().st_size > 0
    assert f"report: {runs / 'report.html'}" in ranked.stdout
    # Nothing was translated or scored again.
    assert len(scored) == 16
    assert {path: path.stat().st_mtime_ns for path in scored} == scored
    # A model run on other sentences is not ranked beside them.
    own_run(tmp_path, "other", limit="1")
    refused = command(tmp_path, "leaderboard", "runs", env=OFFLINE)
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        f"bouquet-eval: {runs / 'other'} and {runs / 'first'} differ in limit: 1 in "
        f"{runs / 'other' / 'bouquet-eval.yaml'}, 2 in {runs / 'first' / 'bouquet-eval.yaml'};"
    ), refused.stderr
