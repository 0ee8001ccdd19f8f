"""Where the workflow's own files are, and command lines that can be pasted anywhere.

`BOUQUET_EVAL_HOME` names the workflow's files (the repository, or the copy of it that a run as
a Snakemake module makes) in configuration paths. The workflow never sets the variable: its
plan expands `${BOUQUET_EVAL_HOME}` with the folder its Snakefile came from
(`planning.plan.Sources`), and its jobs receive the expanded paths. Outside the workflow (a
script of one's own, a shell) it defaults to the repository this package is imported from.

Command lines the project prints name the Snakefile by its absolute path and the configuration
files by theirs, so that they work from any directory: `given_configfiles` reads them from the
process's command line (`sys.argv`), which is all this module reads besides the environment;
the workflow reads it so only to print a message (a dataset the Hugging Face cache lacks, while
Snakemake parses it). Nothing here writes.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

HOME_VARIABLE = "BOUQUET_EVAL_HOME"
"""Names the workflow's own files in configuration paths (`${BOUQUET_EVAL_HOME}/data/...`);
an environment variable of that name, where set, wins."""


def workflow_home() -> Path | None:
    """$BOUQUET_EVAL_HOME, or else the repository holding this package; None if neither."""
    if os.environ.get(HOME_VARIABLE):
        return Path(os.environ[HOME_VARIABLE])
    repository = Path(__file__).resolve().parents[3]
    return repository if (repository / "workflow" / "Snakefile").is_file() else None


def snakefile() -> str:
    home = workflow_home()
    return str(home / "workflow" / "Snakefile") if home else "<path to>/workflow/Snakefile"


def given_configfiles(argv: Sequence[str] = sys.argv, cwd: str | None = None) -> list[str]:
    """The --configfile arguments of a snakemake command line, made absolute against the
    directory it was started from (the shell's, $PWD: Snakemake has moved to --directory)."""
    start = Path(cwd or os.environ.get("PWD") or os.getcwd())
    files: list[str] = []
    taking = False
    for argument in argv[1:]:
        name, equals, value = argument.partition("=")
        if name in ("--configfile", "--configfiles"):
            taking = not equals
            files += [value] if equals else []
        elif argument.startswith("-"):
            taking = False
        elif taking:
            files.append(argument)
    return [str(start / os.path.expanduser(file)) for file in files]


def snakemake_command(target: str, configfiles: Sequence[str]) -> str:
    """A snakemake command line that runs `target` of this workflow, target first (the
    --configfile option takes every argument that follows it)."""
    arguments = ["snakemake", "-s", snakefile(), target, "--cores", "1"]
    if configfiles:
        arguments += ["--configfile", *configfiles]
    return shlex.join(arguments)
