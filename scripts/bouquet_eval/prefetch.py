"""Fetch everything the workflow needs from the Hugging Face hub into the local cache.

Run once on a machine with network access; compute jobs can then set HF_HUB_OFFLINE=1. Local
paths are left alone, so the same configuration works on both sides.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def hub_models(config: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(kind, hub id or file spec, revision) of every hub resource the configuration names."""
    wanted: list[tuple[str, str, str | None]] = []
    if "metricx" in config["metrics"]:
        for key in ("model", "tokenizer"):
            wanted.append(("repository", config["metricx"][key], None))
    if "glotlid" in config["metrics"]:
        wanted.append(("file", config["glotlid"]["model"], config["glotlid"]["revision"]))
    return [(kind, spec, revision) for kind, spec, revision in wanted if not Path(spec).exists()]


def prefetch(config: dict[str, Any]) -> list[str]:
    """Download what is missing from the cache; return the local paths."""
    from huggingface_hub import hf_hub_download, snapshot_download

    paths = []
    for kind, spec, revision in hub_models(config):
        if kind == "repository":
            path = snapshot_download(spec, revision=revision)
        else:
            owner, repository, filename = spec.split("/", 2)
            path = hf_hub_download(f"{owner}/{repository}", filename, revision=revision)
        log.info("%s -> %s", spec, path)
        paths.append(path)
    return paths
