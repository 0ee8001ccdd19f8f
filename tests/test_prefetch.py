"""Prefetching hub resources, checked offline against a Hugging Face cache laid out by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bouquet_eval.prefetch import hub_models

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"


def config(**overrides) -> dict:
    return {
        "metrics": ["chrf", "metricx", "glotlid"],
        "metricx": {"model": "google/metricx-24-hybrid-xl-v2p6", "tokenizer": "google/mt5-xl"},
        "glotlid": {"model": "cis-lmu/glotlid/model_v3.bin", "revision": None},
        **overrides,
    }


def test_local_paths_are_not_fetched(tmp_path: Path) -> None:
    (tmp_path / "metricx").mkdir()
    (tmp_path / "lid.bin").write_bytes(b"")
    local = config(
        metricx={"model": str(tmp_path / "metricx"), "tokenizer": "google/mt5-xl"},
        glotlid={"model": str(tmp_path / "lid.bin"), "revision": None},
    )
    assert hub_models(local) == [("repository", "google/mt5-xl", None)]
    assert hub_models(config(metrics=["chrf"])) == []


def cache_entry(hub: Path, repository: str, files: dict[str, bytes]) -> None:
    folder = hub / f"models--{repository.replace('/', '--')}"
    for name, content in files.items():
        path = folder / "snapshots" / COMMIT / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(COMMIT)


def run_prefetch(home: Path) -> subprocess.CompletedProcess:
    script = (
        "import json, sys; from bouquet_eval.prefetch import prefetch; "
        "print(json.dumps(prefetch(json.loads(sys.argv[1]))))"
    )
    environment = {**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", script, json.dumps(config())],
        env=environment,
        capture_output=True,
        text=True,
    )


def test_offline_prefetch_finds_the_cache(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    cache_entry(hub, "google/metricx-24-hybrid-xl-v2p6", {"config.json": b"{}"})
    cache_entry(hub, "google/mt5-xl", {"spiece.model": b"x"})
    result = run_prefetch(tmp_path)
    assert result.returncode != 0  # GlotLID's file is not cached yet
    assert "model_v3.bin" in result.stderr

    cache_entry(hub, "cis-lmu/glotlid", {"model_v3.bin": b"fasttext"})
    result = run_prefetch(tmp_path)
    assert result.returncode == 0, result.stderr
    paths = [Path(p) for p in json.loads(result.stdout)]
    assert paths[0].name == COMMIT and paths[1].name == COMMIT
    assert paths[2].read_bytes() == b"fasttext"
