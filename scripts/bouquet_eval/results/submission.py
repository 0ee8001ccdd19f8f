"""A model's leaderboard submission: a folder and a .tar.gz of the same files.

The folder holds what the BOUQuET leaderboard asks for and what a maintainer needs to check
it: `scores.csv`, `manifest.json` (the configuration each run used, and its command line), every
`<src>-<tgt>.jsonl` translation, `COMMANDS.txt` (the exact command lines recorded in the
manifest), `eval_results.yaml` (Hugging Face eval-results entries, one per metric, for a model
repository's `.eval_results/` folder; nothing is uploaded) and `SHA256SUMS` (for
`sha256sum -c`). No configuration to run with: a maintainer verifies a submission with their
own (`submissions`, see bouquet_eval.data.received), and takes nothing from it but data.
"""

from __future__ import annotations

import gzip
import json
import shlex
import shutil
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bouquet_eval.core.io import atomic_path, file_sha256
from bouquet_eval.data.dataset import Direction

CHECKSUMS = "SHA256SUMS"
COMMANDS = "COMMANDS.txt"
EVAL_RESULTS = "eval_results.yaml"


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
    lines += [
        "",
        "# A maintainer verifies this submission with their own configuration of the leaderboard",
        "# (dataset, metrics, tolerances), taking from it only its name, scores.csv and",
        "# translations: see docs/results.md of bouquet-eval, `Verifying a received submission`.",
    ]
    return "\n".join(lines) + "\n"


def eval_results_text(entry: Mapping[str, Any], summary: Path, headline: Mapping[str, str]) -> str:
    """Hugging Face eval-results entries (the `.eval_results/*.yaml` format of
    huggingface_hub's EvalResultEntry), one per metric of `headline` (metric name -> its
    score column): the column's mean over directions in `summary` (summary.csv), on the
    dataset of the manifest `entry` (the latest), at the commit its revision resolved to, with
    the metric's signature."""
    import pandas as pd
    import yaml
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    overall = pd.read_csv(summary).set_index("group_by").loc["all"]
    dataset = entry["config"]["dataset"]
    identity = entry.get("dataset", {})
    results = [
        EvalResultEntry(
            dataset_id=dataset["name"],
            task_id=dataset["config"],
            value=float(overall[column]),
            dataset_revision=identity.get("commit"),
            date=entry.get("created"),
            notes=(
                f"{column}: mean over {int(overall['n_directions'])} directions of the "
                f"{dataset['split']} split"
                # Where a local copy lies on the submitter's machine is none of the reader's.
                + (" (a local copy)" if identity.get("path") else "")
                + f"; signature {entry['metrics'][metric]}"
            ),
        )
        for metric, column in headline.items()
        if column in overall and metric in entry.get("metrics", {})
    ]
    return yaml.safe_dump(eval_result_entries_to_yaml(results), sort_keys=False, allow_unicode=True)


def checksums_text(folder: Path) -> str:
    """`sha256sum` format: one `<digest>  <name>` line per file, sorted by name."""
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != CHECKSUMS)
    return "".join(f"{file_sha256(folder / name)}  {name}\n" for name in names)


def write_submission(
    model: str,
    model_dir: Path,
    directions: Sequence[Direction],
    folder: Path,
    archive: Path,
    headline: Mapping[str, str],
) -> None:
    """`headline`: each metric's score column, for the eval-results entries."""
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
    (folder / COMMANDS).write_text(commands_text(model, entries), encoding="utf-8")
    (folder / EVAL_RESULTS).write_text(
        eval_results_text(entries[-1], model_dir / "summary.csv", headline), encoding="utf-8"
    )
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
