"""A model's leaderboard submission: a folder and a .tar.gz of the same files.

The folder holds what the BOUQuET leaderboard asks for and what a maintainer needs to check
it: `scores.csv`, `manifest.json` (the configuration each run used, and its command line), every
`<src>-<tgt>.jsonl` translation, `COMMANDS.txt` (the exact command lines recorded in the
manifest), `eval_results_<column>.yaml` (Hugging Face eval results, one file per metric, for a
model repository's `.eval_results/` folder; nothing is uploaded) and `EVAL_RESULTS.txt` (what
they hold, or why there are none: only a run of BOUQuET's full test split at a commit of the
Hub has any), and `SHA256SUMS` (for `sha256sum -c`). No configuration to run with: a
maintainer verifies a submission with their own (`submissions`, see
bouquet_eval.data.received), and takes nothing from it but data.
"""

from __future__ import annotations

import gzip
import json
import re
import shlex
import shutil
import tarfile
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from bouquet_eval.core.io import atomic_path, file_sha256
from bouquet_eval.data.dataset import DEFAULT_DATASET, Direction
from bouquet_eval.translators.backends import bounds

CHECKSUMS = "SHA256SUMS"
COMMANDS = "COMMANDS.txt"
EVAL_RESULTS_NOTE = "EVAL_RESULTS.txt"
EVAL_RESULTS_PREFIX = "eval_results_"
"""Each metric's eval-results file: `eval_results_<score column>.yaml`."""
BOUQUET = DEFAULT_DATASET["name"]


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


def eval_results_refusals(
    entry: Mapping[str, Any], evaluated: Collection[str], dataset_directions: Collection[str]
) -> list[str]:
    """Why the run of the manifest `entry` (the latest) gives no number a model card may show
    as BOUQuET's: empty for BOUQuET's full test split at a commit of the Hub, read whole
    (`evaluated`: the directions of scores.csv; `dataset_directions`: the dataset's)."""
    identity = entry.get("dataset", {})
    reasons = []
    if "commit" not in identity:
        reasons.append(
            "the dataset was read from a local folder (dataset.path), which is not known to "
            "be BOUQuET at a commit of the Hub"
        )
    else:
        if identity.get("name") != BOUQUET:
            reasons.append(f"the dataset is {identity.get('name')}, not {BOUQUET}")
        if identity.get("split") != "test":
            reasons.append(f"the split is {identity.get('split')}, not BOUQuET's test split")
        if not re.fullmatch(r"[0-9a-f]{40}", str(identity["commit"])):
            reasons.append(f"the dataset revision resolved to {identity['commit']}, not a commit")
    if entry.get("limit") is not None:
        reasons.append(f"limit: {entry['limit']} sentences per direction, not every sentence")
    if not set(dataset_directions) <= set(evaluated):
        reasons.append(
            f"{len(set(evaluated) & set(dataset_directions))} of the dataset's "
            f"{len(set(dataset_directions))} directions were evaluated (directions.list, "
            "src_langs, tgt_langs or shard select part of them)"
        )
    bound = bounds([entry.get("model", {})]) if "translator" in entry.get("model", {}) else {}
    if bound:
        reasons.append(
            f"'{entry['model']['name']}' is a reference point (translator: "
            f"{entry['model']['translator']}), not a model"
        )
    return reasons


def eval_results_files(
    entry: Mapping[str, Any],
    summary: Path,
    headline: Mapping[str, str],
    lower_is_better: Collection[str],
) -> dict[str, str]:
    """Hugging Face eval results (the `.eval_results/*.yaml` format of huggingface_hub's
    EvalResultEntry), one file per metric of `headline` (metric name -> its score column),
    each of one entry: the column's mean over directions in `summary` (summary.csv), on
    BOUQuET at the commit the manifest `entry` (the latest) resolved its revision to, as task
    `<config>_<column>`, so that a leaderboard tells the metrics apart by the dataset and task
    ids; the date of the run, and in `notes` what the value is and the metric's signature.
    File name -> its YAML text."""
    import pandas as pd
    import yaml
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    overall = pd.read_csv(summary).set_index("group_by").loc["all"]
    identity = entry["dataset"]
    files = {}
    for metric, column in headline.items():
        if column not in overall or metric not in entry.get("metrics", {}):
            continue
        better = "lower" if column in lower_is_better else "higher"
        result = EvalResultEntry(
            dataset_id=identity["name"],
            task_id=f"{identity['config']}_{column}",
            value=float(overall[column]),
            dataset_revision=identity["commit"],
            date=entry.get("created"),
            notes=(
                f"{column} ({better} is better): mean over the "
                f"{int(overall['n_directions'])} directions of the {identity['split']} split; "
                f"signature {entry['metrics'][metric]}"
            ),
        )
        text = yaml.safe_dump(
            eval_result_entries_to_yaml([result]), sort_keys=False, allow_unicode=True
        )
        files[f"{EVAL_RESULTS_PREFIX}{column}.yaml"] = text
    return files


def eval_results_note(
    model: str, entry: Mapping[str, Any], files: Mapping[str, str], refusals: Sequence[str]
) -> str:
    """EVAL_RESULTS.txt: the eval-results files written and what they hold, or why none."""
    if refusals:
        return "".join(
            [
                f"No Hugging Face eval results for '{model}': a model card would show them as "
                "BOUQuET's numbers, and this run is not BOUQuET's full test split at a commit "
                "of the Hub:\n",
                *(f"- {reason}\n" for reason in refusals),
            ]
        )
    identity = entry["dataset"]
    lines = [
        f"Hugging Face eval results for '{model}' on {identity['name']} "
        f"({identity['config']}, {identity['split']} split) at commit {identity['commit']}: "
        "one file per metric, one entry each. Copy them into the model repository's "
        ".eval_results/ folder (nothing is uploaded).\n",
    ]
    import yaml

    for name, text in files.items():
        (data,) = yaml.safe_load(text)
        lines.append(f"- {name}: task {data['dataset']['task_id']}, value {data['value']}\n")
    return "".join(lines)


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
    lower_is_better: Collection[str],
    dataset_directions: Collection[str],
) -> str:
    """`headline`: each metric's score column, for the eval-results entries;
    `dataset_directions`: every direction of the dataset (only a run of all of them has
    eval results). What EVAL_RESULTS.txt says."""
    import pandas as pd

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
    latest = entries[-1]
    evaluated = pd.read_csv(model_dir / "scores.csv", usecols=["src_lang", "tgt_lang"])
    refusals = eval_results_refusals(
        latest, set(evaluated["src_lang"] + "-" + evaluated["tgt_lang"]), dataset_directions
    )
    files = (
        {}
        if refusals
        else eval_results_files(latest, model_dir / "summary.csv", headline, lower_is_better)
    )
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    note = eval_results_note(model, latest, files, refusals)
    (folder / EVAL_RESULTS_NOTE).write_text(note, encoding="utf-8")
    (folder / CHECKSUMS).write_text(checksums_text(folder), encoding="utf-8")
    write_archive(folder, archive)
    return note


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
