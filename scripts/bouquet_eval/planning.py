"""Deciding at every run which existing outputs are current, and telling Snakemake.

Snakemake plans from missing files, modification times and its own metadata. That misses what
only a content check sees: an output that Snakemake restored after its job failed (a fresh
modification time on old content), a file cut short or edited by hand, an input whose content
changed while the output still looks newer. So each run checks every existing output of a
job (`ResumableOutput.stale_reason`); when one is not current it rewrites the job's *stamp*, a
small file that is an input of the job, with new content. Snakemake then plans the job
("updated input files"); the job rebuilds exactly the outputs that are not current, from a
verified cached copy or by recomputing them, and leaves the others alone.

Every job has its stamp as an input from the first run on (a dry run writes a stamp only to
show a job that must run): a stamp that appeared later would change the job's set of inputs,
which Snakemake takes as a reason to run it. A stamp rewritten by a plan whose job never ran (a
dry run, a run stopped first) is dated back before the job's outputs once they are all current
again, so that it no longer makes Snakemake plan the job: a dry run changes nothing that later
runs do.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bouquet_eval.io import write_json
from bouquet_eval.provenance import ResumableOutput

STAMPS = Path(".provenance") / "jobs"
"""Under a model's output folder: one stamp per job."""


@dataclass(frozen=True)
class StaleOutput:
    path: Path
    reason: str


def stamp_path(model_dir: Path, job: str) -> Path:
    return model_dir / STAMPS / f"{job}.json"


def check_job(
    stamp: Path, outputs: Sequence[ResumableOutput], dry_run: bool = False
) -> list[StaleOutput]:
    """The job's existing outputs that are not current; the stamp is rewritten if there are any,
    else written if missing (unless `dry_run`), and dated back before the outputs.

    Missing outputs are Snakemake's to notice.
    """
    existing = [output for output in outputs if output.path.exists()]
    stale = [
        StaleOutput(output.path, reason)
        for output in existing
        if (reason := output.stale_reason()) is not None
    ]
    if stale:
        write_json(
            stamp,
            {
                "noticed_ns": time.time_ns(),
                "stale": {str(item.path): item.reason for item in stale},
            },
        )
    else:
        if not stamp.is_file() and not dry_run:
            write_json(stamp, {"noticed_ns": None, "stale": {}})
        if existing and stamp.is_file():
            _date_back(stamp, min(output.path.stat().st_mtime_ns for output in existing))
    return stale


def _date_back(stamp: Path, oldest_output_ns: int) -> None:
    """Make the stamp older than the oldest output, unless it already is."""
    if stamp.stat().st_mtime_ns >= oldest_output_ns:
        earlier = oldest_output_ns - 1_000_000_000
        os.utime(stamp, ns=(earlier, earlier))


NO_VALUE_FLAGS = frozenset("npqrFfk")
"""Snakemake's one-letter options that take no value, as they may be run together (`-np`)."""


def is_dry_run(argv: Sequence[str]) -> bool:
    """Whether Snakemake's command line asks for a dry run. Snakemake itself knows only once
    the plan is made, after the rules (and their stamps) are."""
    return any(
        argument in ("--dry-run", "--dryrun")
        or (
            argument.startswith("-")
            and not argument.startswith("--")
            and "n" in argument
            and set(argument[1:]) <= NO_VALUE_FLAGS
        )
        for argument in argv[1:]
    )


def stamp_input(stamp: Path) -> list[str]:
    """The job's stamp as a list of inputs: empty until the first plan wrote it."""
    return [str(stamp)] if stamp.is_file() else []


def describe(stale: list[StaleOutput], shown: int = 10) -> str:
    """A message for the person running the workflow."""
    lines = [f"{len(stale)} existing output(s) are not current and will be rebuilt:"]
    lines += [f"  {item.path}: {item.reason}" for item in stale[:shown]]
    if len(stale) > shown:
        lines.append(f"  ... and {len(stale) - shown} more")
    return "\n".join(lines)
