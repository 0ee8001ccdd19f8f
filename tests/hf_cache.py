"""A Hugging Face cache laid out as a download leaves it, for tests that read it offline."""

from __future__ import annotations

from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def cache_entry(hub: Path, repository: str, files: dict[str, bytes], commit: str = COMMIT) -> Path:
    """Put `files` of model `repository` at `commit` (its `main`) into the cache folder `hub`
    (HF_HOME/hub); returns the snapshot folder."""
    folder = hub / f"models--{repository.replace('/', '--')}"
    snapshot = folder / "snapshots" / commit
    for name, content in files.items():
        path = snapshot / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / "main").write_text(commit)
    return snapshot
