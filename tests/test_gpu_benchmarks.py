"""The GPU benchmarks run end to end on the CPU with `--tiny`, so that they do not rot unseen.

Their numbers mean nothing here; what is checked is that every plan ran and that what the
results files report adds up. They run in this process, whose torch and transformers are
already imported.
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest

from .conftest import REPOSITORY

BENCHMARKS = REPOSITORY / "benchmarks"


def run_benchmark(monkeypatch: pytest.MonkeyPatch, script: str, *arguments: str) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setattr(sys, "argv", [str(BENCHMARKS / script), *arguments])
    runpy.run_path(str(BENCHMARKS / script), run_name="__main__")


def test_metricx_benchmark_runs_tiny(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "metricx.json"
    arguments = ["--tiny", "--segments", "8", "--single-segments", "2", "--budgets", "2000"]
    run_benchmark(
        monkeypatch,
        "metricx_batching.py",
        *arguments,
        "--fixed",
        "1,3",
        "--repeats",
        "1",
        "--output",
        str(output),
    )

    plans = json.loads(output.read_text())["plans"]
    assert list(plans) == ["budget 2000, sorted", "fixed 1, unsorted", "fixed 3, unsorted"]
    assert [plan["segments"] for plan in plans.values()] == [8, 2, 8]
    assert [plan["batches"] for plan in plans.values()][1:] == [2, 3]
    assert plans["fixed 1, unsorted"]["real_ratio"] == 1.0
    assert all(
        0 < plan["real_ratio"] <= 1 and plan["segments_per_s"] > 0 for plan in plans.values()
    )
    assert "| plan | segments | batches |" in capsys.readouterr().out


def test_seq2seq_benchmark_runs_tiny(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "seq2seq.json"
    arguments = ["--tiny", "--segments", "4", "--batch-sizes", "1,4", "--new-tokens", "3"]
    run_benchmark(monkeypatch, "seq2seq_throughput.py", *arguments, "--output", str(output))

    results = json.loads(output.read_text())["results"]
    assert list(results) == ["tiny batch 1", "tiny batch 4"]
    # Every prompt generates exactly --new-tokens tokens: the end token is held back.
    assert [run["generated_tokens"] for run in results.values()] == [4 * 3, 4 * 3]
    assert "| shape | batch_size |" in capsys.readouterr().out


def test_metricx_flops_benchmark_runs_tiny_and_its_speed_ups_keep_the_scores(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from bouquet_eval.metrics.metricx import SPEED_UPS

    output = tmp_path / "flops.json"
    arguments = ["--tiny", "--segments", "24", "--attention", "--repeats", "2"]
    run_benchmark(monkeypatch, "metricx_flops.py", *arguments, "--output", str(output))

    variants = json.loads(output.read_text())["variants"]
    names = list(SPEED_UPS)
    assert [variant["variant"] for variant in variants] == [
        "as transformers builds it",
        *(" + ".join(names[: count + 1]) for count in range(len(names))),
        " + ".join([*names, "widths to a multiple of 16"]),
    ]
    assert all(variant["segments_per_s"] > 0 for variant in variants)
    printed = capsys.readouterr().out
    # float32 on the CPU: each speed-up computes what the model as built computes.
    rows = [line for line in printed.splitlines() if line.startswith("|") and " + " in line]
    differences = [float(row.rsplit("|", 2)[1]) for row in rows]
    assert differences and max(differences) < 1e-4


@pytest.mark.comet
def test_comet_gpu_benchmark_runs_tiny(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "comet.json"
    arguments = ["--shape", "comet", "--tiny", "--segments", "48", "--direction", "16"]
    arguments += ["--budgets", "600,300", "--repeats", "2", "--cold-repeats", "2"]
    run_benchmark(monkeypatch, "comet_gpu.py", *arguments, "--output", str(output))

    record = json.loads(output.read_text())
    plans = record["plans"]
    assert [plan["plan"] for plan in plans] == [
        "ours, batch_tokens 600, float32",
        "ours, batch_tokens 300, float32",
        "comet-score, float16, batches of 16",
    ]
    # Cold against cold and warm against warm, each repeated, each side on its own loads.
    assert [len(plan["warm"]["seconds"]) for plan in plans] == [2, 2, 2]
    assert [plan["cold"] and len(plan["cold"]["seconds"]) for plan in plans] == [2, None, 2]
    assert plans[0]["batches"] < plans[1]["batches"]  # a smaller budget, more batches
    assert plans[2]["batches"] == 3  # 48 segments, 16 at a time
    assert plans[0]["tflops"] > 0 and record["warm_ratio"] > 0 and record["cold_ratio"] > 0
    printed = capsys.readouterr().out
    assert "| plan | cold s (median, range) | warm s (median, range) |" in printed
    assert "warm against warm" in printed and "cold against cold" in printed


@pytest.mark.blaser
def test_blaser_gpu_benchmark_runs_tiny(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    output = tmp_path / "blaser.json"
    arguments = ["--tiny", "--languages", "2", "--sentences", "12", "--batch-sizes", "4,8"]
    run_benchmark(monkeypatch, "blaser_gpu.py", *arguments, "--output", str(output))

    plans = json.loads(output.read_text())["plans"]
    assert [plan["plan"] for plan in plans] == [
        "README pipeline, batch 4",
        "ours, batch 4",
        "ours, batch 8",
    ]
    assert [plan["segments"] for plan in plans] == [48] * 3
    # The README embeds three sentences a segment; ours each distinct source and reference
    # once (English, each partner), and each translation.
    assert [plan["embedded"] for plan in plans] == [144, 84, 84]
    assert all(plan["max_difference"] < 1e-5 for plan in plans[1:])
    assert "| plan | seconds | segments/s |" in capsys.readouterr().out
