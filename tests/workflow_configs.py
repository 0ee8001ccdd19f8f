"""Configurations of workflow runs on the bundled sample, shared by the workflow tests."""

from __future__ import annotations

from pathlib import Path

from bouquet_eval.data.dataset import Direction

from .conftest import SAMPLE

SAMPLE_DIRECTIONS = sorted(Direction.parse(path.stem) for path in SAMPLE.glob("*.parquet"))


SMALL_JOBS = {
    "translate": {"mem_mb": 500, "runtime": 5, "cpus": 1},
    "score": {"mem_mb": 500, "runtime": 5, "cpus": 1},
}


def bounds_config(dataset: Path, **overrides) -> dict:
    return {
        "dataset": {"path": str(dataset)},
        "output_dir": "runs",
        "shards": 3,
        "resources": SMALL_JOBS,
        "models": [
            {"name": "copy-source", "translator": "copy-source"},
            {"name": "reference", "translator": "reference"},
        ],
        **overrides,
    }


def met_bouquet_config() -> dict:
    """The metaeval target on Met-BOUQuET (tests/hub_datasets.py), quick statistics."""
    return {
        "dataset": {"name": "facebook/bouquet", "revision": "main"},
        "shards": 1,
        "metrics": ["chrf"],
        "resources": SMALL_JOBS,
        "statistics": {"bootstrap_resamples": 10},
        "metaeval": {"judgements": "met-bouquet", "permutation_trials": 10},
        "models": [{"name": "reference", "translator": "reference"}],
    }


def recording_model(name: str, record: Path, **kwargs) -> dict:
    return {
        "name": name,
        "translator": "recording:RecordingTranslator",
        "translator_kwargs": {"record": str(record), **kwargs},
        "prompt_fn": "recording:tagged_prompt",
    }


def recorded(record: Path) -> list[str]:
    return record.read_text(encoding="utf-8").split() if record.exists() else []
