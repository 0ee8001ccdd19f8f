"""Where the workflow's own files are, and command lines that can be pasted anywhere.

`BOUQUET_EVAL_HOME` names the workflow's files (the repository, or the copy of it that a run as
a Snakemake module makes) in configuration paths. The workflow never sets the variable: its
plan expands `${BOUQUET_EVAL_HOME}` with the folder its Snakefile came from
(`planning.plan.Sources`), and its jobs receive the expanded paths. Outside the workflow (a
script of one's own, a shell) it defaults to the repository this package is imported from.

Command lines the project prints name the Snakefile by its absolute path and the configuration
files by theirs, so that they work from any directory: `given_configfiles` reads them from the
process's command line (`sys.argv`), which is all this module reads besides the environment;
the workflow reads it so only to print how to fetch what the Hugging Face cache lacks and the
Hub cannot give (`fetch_hint`): the dataset or Met-BOUQuET's judgements while Snakemake parses
or plans the run, a model or tokenizer when it starts or in a job. What a message tells the
user to do is said in the terms of the interface they use (`interface`). Nothing here writes.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

COMMAND_VARIABLE = "BOUQUET_EVAL_COMMAND"
"""Set by the `bouquet-eval` command, which runs Snakemake in its own process: the command line
as the person typed it (JSON), recorded instead of the Snakemake arguments it became; its
presence says the run speaks the command's terms (`interface`)."""

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
    files = option_values(argv, ("--configfile", "--configfiles"))
    return [str(start / os.path.expanduser(file)) for file in files]


def option_values(argv: Sequence[str], names: Sequence[str]) -> list[str]:
    """The values a snakemake command line gives the options `names` (each takes several)."""
    return [value for _, value in classified(argv[1:], names) if value is not None]


def classified(arguments: Sequence[str], names: Sequence[str]) -> Iterator[tuple[str, str | None]]:
    """Each of Snakemake's `arguments`, with the value it gives one of the options `names`
    (each takes several: `--configfile a b`, `--configfile=a`), or None: another option or
    argument, or one of `names` itself with its values after it."""
    taking = False  # whether the arguments are values of one of `names`
    for argument in arguments:
        name, equals, value = argument.partition("=")
        if name in names:
            taking = not equals
            yield argument, value if equals else None
        elif taking and not argument.startswith("-"):
            yield argument, argument
        else:
            taking = False
            yield argument, None


def report_command(
    snakefile: str, workdir: str | Path, report: Path, argv: Sequence[str] = sys.argv
) -> str:
    """The snakemake command line that writes the report of the run `argv` started, to be
    pasted in any folder: the Snakefile, the working directory and the report absolute, the
    run's `--config` items and configuration files (absolute) with it."""
    arguments = ["snakemake", "-s", snakefile, "-d", str(workdir), "--report", str(report)]
    items = option_values(argv, ("--config", "-C"))
    if items:
        arguments += ["--config", *items]
    files = given_configfiles(argv)
    if files:
        arguments += ["--configfile", *files]
    return shlex.join(arguments)


def snakemake_command(target: str, configfiles: Sequence[str]) -> str:
    """A snakemake command line that runs `target` of this workflow, target first (the
    --configfile option takes every argument that follows it)."""
    arguments = ["snakemake", "-s", snakefile(), target, "--cores", "1"]
    if configfiles:
        arguments += ["--configfile", *configfiles]
    return shlex.join(arguments)


def interface() -> str:
    """How this run was started: "command" (`bouquet-eval`, which runs Snakemake in its own
    process and says so in the environment, for its jobs too), "snakemake" (the workflow), or
    "python" (the package, from a script of one's own)."""
    if os.environ.get(COMMAND_VARIABLE):
        return "command"
    return "snakemake" if "snakemake" in sys.modules else "python"


def fetch_hint() -> str:
    """How to fill the Hugging Face cache before a run without network."""
    where = "on a machine with network access, with the same"
    kind = interface()
    if kind == "command":
        # Snakemake runs the command in the model's folder, its jobs too.
        command = shlex.join(["bouquet-eval", "prefetch", "--output-dir", os.getcwd()])
        return f"Fetch it {where} HF_HOME: `{command}`; runs without network then read the cache"
    if kind == "snakemake":
        command = snakemake_command("prefetch", given_configfiles())
        return (
            f"Fetch it {where} configuration and HF_HOME: `{command}`; runs without network, "
            "and jobs with HF_HUB_OFFLINE=1, then read the cache"
        )
    return (
        f"Make the same call {where} HF_HOME: it fetches what it reads into the cache, which "
        "calls without network then read"
    )


def local_dataset_hint() -> str:
    """How to run on a local folder of the dataset's files instead of the Hub."""
    home = workflow_home()
    sample = f" (the bundled sample: {home / 'data' / 'sample' / 'parquet'})" if home else ""
    kind = interface()
    if kind == "command":
        return f"give --dataset-path a folder of <src>-<tgt>.parquet files{sample}"
    if kind == "snakemake":
        return (
            "set dataset.path to a folder of <src>-<tgt>.parquet files, or leave out "
            "--configfile to run the bundled sample"
        )
    return f"pass dataset= a folder of <src>-<tgt>.parquet files{sample}"
