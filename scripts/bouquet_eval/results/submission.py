"""A model's leaderboard submission: a folder and a .tar.gz of the same files.

The folder holds what the BOUQuET leaderboard asks for and what a maintainer needs to check
it: `scores.csv`, `manifest.json`, every `<src>-<tgt>.jsonl` translation, `config.yaml`,
`COMMANDS.txt` (the exact command lines recorded in the manifest, and the one that verifies
the folder) and `SHA256SUMS` (for `sha256sum -c`). Translations sit at the folder's top, so
that the folder can be dropped into `<output_dir>/<model>/` as it is and verified there with
its own `config.yaml`: the latest run's configuration (which holds no secret) with this model
alone, as translations provided in that folder; the model's entry as it was run heads the
file as a comment.
"""

from __future__ import annotations

import gzip
import json
import shlex
import shutil
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bouquet_eval.core.home import snakemake_command
from bouquet_eval.core.io import atomic_path, file_sha256
from bouquet_eval.data.dataset import Direction

CHECKSUMS = "SHA256SUMS"
COMMANDS = "COMMANDS.txt"
CONFIG = "config.yaml"


def commands_text(model: str, entries: Sequence[dict[str, Any]]) -> str:
    """Every recorded command line, oldest first, with when and with what it ran."""
    lines = [
        f"# The command lines that produced the outputs of '{model}', as recorded in",
        "# manifest.json (one per workflow run that aggregated this model; oldest first).",
    ]
    for entry in entries:
        command = entry.get("command")
        lines += [
            "",
            f"# {entry.get('created')}: bouquet-eval {entry.get('bouquet_eval_version')}, "
            f"snakemake {entry.get('snakemake_version')}, Python {entry.get('python_version')}",
            shlex.join(command) if command else "# (no command line recorded)",
        ]
    folder = f"{entries[-1]['config']['output_dir']}/{model}"
    lines += [
        "",
        f"# To check this submission: copy this folder to {folder}/ (where its config.yaml",
        f"# expects it) and run, from the folder holding {folder}/ (the Snakefile is the",
        "# workflow's own on the machine that made this file; elsewhere, name your copy's):",
        f"# {snakemake_command('verify', [f'{folder}/{CONFIG}'])}",
    ]
    return "\n".join(lines) + "\n"


def verification_config(model: str, config: dict[str, Any]) -> str:
    """`config` (as recorded in the manifest) as YAML, with `model` alone, provided from its
    own folder; the entry it was run with heads the text as a comment."""
    import yaml

    as_run = [entry for entry in config["models"] if entry["name"] == model]
    provided = {
        "name": model,
        "translator": "provided",
        "path": f"{config['output_dir']}/{model}",
    }
    heading = yaml.safe_dump(as_run, sort_keys=False, allow_unicode=True)
    return (
        f"# The configuration that verifies '{model}' once this folder is <output_dir>/{model}/.\n"
        "# The model was run as:\n"
        + "".join(f"#   {line}\n" for line in heading.splitlines())
        + yaml.safe_dump({**config, "models": [provided]}, sort_keys=False, allow_unicode=True)
    )


def checksums_text(folder: Path) -> str:
    """`sha256sum` format: one `<digest>  <name>` line per file, sorted by name."""
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != CHECKSUMS)
    return "".join(f"{file_sha256(folder / name)}  {name}\n" for name in names)


def write_submission(
    model: str, model_dir: Path, directions: Sequence[Direction], folder: Path, archive: Path
) -> None:
    manifest = json.loads((model_dir / "manifest.json").read_text(encoding="utf-8"))
    entries = manifest.get("entries", [])
    if not entries:
        raise ValueError(f"{model_dir / 'manifest.json'} has no entries: run the workflow first")
    # Only this run's files: a direction no longer evaluated must not linger.
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name in ("scores.csv", "manifest.json", *(f"{d}.jsonl" for d in directions)):
        source = model_dir / name
        if not source.is_file():
            raise FileNotFoundError(f"{source} not found: run the workflow first")
        shutil.copyfile(source, folder / name)
    # The latest run's configuration: what a maintainer verifies with.
    (folder / CONFIG).write_text(
        verification_config(model, entries[-1]["config"]), encoding="utf-8"
    )
    (folder / COMMANDS).write_text(commands_text(model, entries), encoding="utf-8")
    (folder / CHECKSUMS).write_text(checksums_text(folder), encoding="utf-8")
    write_archive(folder, archive)


def write_archive(folder: Path, archive: Path) -> None:
    """A .tar.gz of `folder` under its own name; the same files give the same bytes."""

    def normalised(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    with (
        atomic_path(archive) as temporary,
        open(temporary, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w") as tar,
    ):
        tar.add(folder, arcname=folder.name, recursive=False, filter=normalised)
        for path in sorted(folder.iterdir()):
            tar.add(path, arcname=f"{folder.name}/{path.name}", filter=normalised)
