"""Job granularity on one machine: one model load per job, and one GPU per concurrent job."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pandas as pd
import pytest

from bouquet_eval.core.gpus import gpu_lease
from bouquet_eval.metrics import load_metrics
from bouquet_eval.metrics.records import MetricSet
from bouquet_eval.planning.job_cpus import default_cpus
from bouquet_eval.planning.sharding import assign_shards
from bouquet_eval.translators.backends import model_cpus

from .conftest import PLUGINS, Workflow, patience
from .synthetic import synthetic_directions, write_dataset
from .workflow_configs import SMALL_JOBS, bounds_config, recording_model


def loads(record: Path) -> int:
    return sum(line.startswith("LOAD") for line in recorded_lines(record))


def recorded_lines(record: Path) -> list[str]:
    return record.read_text().splitlines() if record.exists() else []


def test_one_model_load_per_job(workflow: Workflow, tmp_path: Path) -> None:
    directions = synthetic_directions(60)
    write_dataset(tmp_path / "dataset", directions)
    translator_record = workflow.workdir / "translator.txt"
    metric_record = workflow.workdir / "metric.txt"
    workflow.write_config(
        {
            "dataset": {"path": str(tmp_path / "dataset")},
            "shards": 4,
            "metrics": ["chrf", "recording:LoadCountingMetric"],
            "resources": SMALL_JOBS,
            "models": [recording_model("rec", translator_record)],
        }
    )
    environment = {"RECORDING_METRIC_FILE": str(metric_record)}
    workflow.run(env=environment)
    assert loads(translator_record) == 4
    assert loads(metric_record) == 4
    scored = workflow.workdir / "runs" / "rec" / f"{directions[0]}.scored.parquet"
    assert "length_ratio" in pd.read_parquet(scored).columns

    # Deleted outputs come back from the cache: no model loads at all.
    folder = workflow.workdir / "runs" / "rec"
    deleted = directions[::12]
    for direction in deleted:
        (folder / f"{direction}.jsonl").unlink()
        (folder / f"{direction}.scored.parquet").unlink()
    translator_record.unlink()
    metric_record.unlink()
    workflow.run(env=environment)
    assert loads(translator_record) == 0 and loads(metric_record) == 0

    # Without the cache, only the shards that own them load their models again. (A metric's
    # own scores of a direction, kept apart, would be current: the same translations.)
    for direction in deleted:
        for pattern in ("", "by-metric/*/"):
            for path in folder.glob(f"{pattern}{direction}.*"):
                path.unlink()
            for path in folder.glob(f"{pattern}.cache/*/{direction}.*"):
                path.unlink()
    owning = {
        name
        for name, members in assign_shards(directions, 4).items()
        if set(members) & set(deleted)
    }
    assert 1 < len(owning) < 4
    workflow.run(env=environment)
    assert loads(translator_record) == len(owning)
    assert loads(metric_record) == len(owning)
    translated = [line for line in recorded_lines(translator_record) if not line.startswith("LOAD")]
    assert sorted(translated) == sorted(d.name for d in deleted)


def test_concurrent_gpu_jobs_get_distinct_devices(workflow: Workflow, dataset: Path) -> None:
    record = workflow.workdir / "record.txt"
    model = {**recording_model("rec", record, load_seconds=1.0, record_devices=True), "gpus": 1}
    workflow.write_config(
        {
            "dataset": {"path": str(dataset)},
            "directions": {"src_langs": ["eng_Latn"]},
            "shards": "per-direction",
            "resources": SMALL_JOBS,
            "models": [model],
        }
    )
    workflow.run("--resources", "gpu=2", env={"BOUQUET_EVAL_GPUS": "0,1"})
    uses: list[tuple[str, float, int]] = []
    for line in Path(f"{record}.devices").read_text().splitlines():
        _, device, at, process, _ = line.split()
        uses.append((device, float(at), int(process)))
    assert len(uses) == 8
    assert {device for device, _, _ in uses} == {"0", "1"}
    # Jobs running at the same time (each holds its device for its ~1 s load) differ.
    spans = {}
    for device, moment, pid in uses:
        spans[pid] = (device, moment - 1.0, moment)
    for pid, (device, start, end) in spans.items():
        for other, (other_device, other_start, other_end) in spans.items():
            if other != pid and start < other_end and other_start < end:
                assert device != other_device


def hold_lease(lease_dir: Path, started) -> None:
    with gpu_lease(1, lease_dir, devices=["0"]):
        started.set()
        time.sleep(60)


@pytest.fixture
def device_zero_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Another process, holding the lease of device 0 in tmp_path until it is killed."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    context = multiprocessing.get_context("fork")
    started = context.Event()
    holder = context.Process(target=hold_lease, args=(tmp_path, started))
    holder.start()
    assert started.wait(10)
    yield holder
    if holder.is_alive() and holder.pid is not None:
        os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)


def test_a_crashed_job_releases_its_gpu(tmp_path: Path, device_zero_held) -> None:
    holder = device_zero_held
    with gpu_lease(1, tmp_path / "other", devices=["0"]) as elsewhere:
        assert elsewhere == ["0"]  # another lease folder is another machine
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)
    began = time.monotonic()
    with gpu_lease(1, tmp_path, devices=["0"], poll_seconds=0.05) as leased:
        assert leased == ["0"]
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert time.monotonic() - began < patience(5)  # at once, not after some expiry
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_lease_takes_a_free_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, device_zero_held
) -> None:
    with gpu_lease(1, tmp_path, devices=["0", "1"]) as leased:
        assert leased == ["1"]
    with (
        pytest.raises(RuntimeError, match="needs 3 GPUs but only 2 exist"),
        gpu_lease(3, tmp_path, devices=["0", "1"]),
    ):
        pass
    # Inside a Slurm allocation the devices are Slurm's (not BOUQUET_EVAL_GPUS), and leases
    # are the allocation's own: device 0, held on this host outside it, is free in it.
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("BOUQUET_EVAL_GPUS", "5,6")
    with gpu_lease(1, tmp_path) as leased:
        assert leased == ["0"]
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"


def most_jobs_at_once(output: str, prefixes: tuple[str, ...]) -> int:
    """The most jobs of rules named `<prefix>...` that ran at the same time, from Snakemake's
    log (a job starts with `localrule <name>:` or `rule <name>:`, and ends with `Finished
    jobid: N (Rule: <name>)`)."""
    running = most = 0
    for line in output.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] in ("rule", "localrule"):
            if words[1].startswith(prefixes):
                running += 1
                most = max(most, running)
        elif line.startswith("Finished jobid") and words[-1].startswith(prefixes):
            running -= 1
    return most


def test_jobs_that_need_little_cpu_overlap_on_two_cores(workflow: Workflow, dataset: Path) -> None:
    """With the configuration's defaults, copy-source and chrF++ jobs take one CPU each."""
    config = bounds_config(dataset, shards=2, models=[{"name": "c", "translator": "copy-source"}])
    del config["resources"]
    workflow.write_config(config)
    # Snakemake's log shows jobs one by one, and their ends (the console names the log).
    console = workflow.run("--quiet", "host").stderr
    (log,) = [line for line in console.splitlines() if line.startswith("Snakemake's full log: ")]
    output = Path(log.split(": ", 1)[1]).read_text(encoding="utf-8")
    assert most_jobs_at_once(output, ("translate_", "score_")) == 2, output


@pytest.mark.parametrize(
    ("translator", "cpus"),
    [("copy-source", 1), ("provided", 1), ("openai", 1), ("vllm", 4), ("nllb", 4), ("x.y:Z", 4)],
)
def test_translate_cpus_follow_the_translator(translator: str, cpus: int) -> None:
    assert model_cpus({"name": "m", "translator": translator}) == cpus


@pytest.mark.parametrize(
    ("metrics", "device", "cpus"),
    [
        (["chrf", "bleu", "ter", "glotlid"], "auto", 1),
        (["chrf", "metricx"], "cuda", 2),
        (["metricx"], "cpu", 4),
        (["chrf", "faults:FlakyMetric"], "auto", 2),
    ],
)
def test_score_cpus_follow_the_metrics(
    metrics: list[str], device: str, cpus: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job computing them all (verification) asks for the most any family needs."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    config = {"metrics": metrics, "metricx": {"device": device}}
    metric_set = MetricSet.of(metrics, config, load_metrics(metrics, config))
    assert default_cpus("score", metric_set) == cpus


def test_each_family_of_score_jobs_asks_for_its_own_cpus() -> None:
    metrics = MetricSet.of(["chrf", "metricx"], {"metricx": {"device": "cuda"}})
    assert default_cpus("score", metrics, "workflow_cpu") == 1
    assert default_cpus("score", metrics, "metrics_gpu") == 2
    assert default_cpus("aggregate", metrics) == 1
