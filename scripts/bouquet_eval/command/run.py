"""Running the workflow for a `bouquet-eval` subcommand, through Snakemake's own command-line
parser and Python API (so that the workflow's profile, `--profile` and every Snakemake option
behave as with `snakemake`), in the model's folder as Snakemake's working directory.

A dry run prints the configuration, the equivalent `snakemake` command and Snakemake's plan. A
real run saves the configuration beside the outputs, sends everything Snakemake and its jobs
print to a log file, and shows instead what was selected, each stage's progress with the time
left, where the results are and the model's scores; the log file is named at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml

from bouquet_eval.command import console
from bouquet_eval.command.config import (
    RUNS_CONFIG,
    SAVED_CONFIG,
    build_config,
    given_paths_made_absolute,
    importable_from,
    model_folder,
    own_code,
    runs_config,
    save,
)
from bouquet_eval.core.config import ConfigError, load_yaml
from bouquet_eval.core.home import COMMAND_VARIABLE, classified
from bouquet_eval.core.secrets import known_secrets, redact_command, refuse_secrets
from bouquet_eval.planning.checks import error_line
from bouquet_eval.planning.selection import SELECTION_FILE_VARIABLE, Selection

REPOSITORY = Path(__file__).resolve().parents[3]
SNAKEFILE = REPOSITORY / "workflow" / "Snakefile"

LOGS = Path("logs") / "bouquet-eval"
"""Under the model's folder: Snakemake's full log of each command."""

STAGES = {
    "translate": ("translate",),
    "score": ("score",),
    "aggregate": (),
    "run": ("translate", "score"),
    "prefetch": (),
    "leaderboard": (),
    "metaeval": (),
}
"""The per-direction stages of each subcommand's targets."""

PREFETCH_LOG = Path("logs") / "prefetch.log"
"""The prefetch rule's log: a line per repository, what it holds at which commit."""


def targets(command: str, sharded: bool) -> list[str]:
    """The workflow's targets: per-direction outputs, and a model's aggregates unless sharded
    (a shard's processes aggregate once all of them are done)."""
    if command in ("prefetch", "metaeval"):
        return [command]
    wanted = {"translate": "translations", "score": "scores"}
    chosen = [wanted[stage] for stage in STAGES[command]]
    if command != "translate" and not sharded:
        chosen.append("aggregates")
    return chosen


def profile_path(name: str) -> str:
    """A profile folder as given (absolute, for a command pasted elsewhere), else the
    repository's profiles/<name> (e.g. slurm)."""
    own = REPOSITORY / "profiles" / name
    if os.path.exists(name):
        return str(Path(name).absolute())
    return str(own) if own.is_dir() else name


def snakemake_arguments(
    command: str, args: argparse.Namespace, folder: Path, config_file: Path, extra: Sequence[str]
) -> list[str]:
    """Snakemake's command line for the subcommand (targets before --configfile, which takes
    every argument after it, and the shard last, as a --config item)."""
    shard = getattr(args, "shard", None)
    arguments = [
        "--snakefile",
        str(SNAKEFILE),
        "--directory",
        str(folder),
        *targets(command, shard is not None),
        "--cores",
        str(args.cores or "all"),
    ]
    if args.jobs:
        arguments += ["--jobs", str(args.jobs)]
    if args.keep_going:
        arguments.append("--keep-going")
    if args.profile:
        arguments += ["--profile", profile_path(args.profile)]
    if args.dry_run:
        arguments.append("--dry-run")
    # Snakemake keeps the last --configfile given: files given after `--` go with the saved
    # configuration, before it, so that the command's flags win.
    rest, config_files = split_config_files(extra)
    arguments += [*rest, "--configfile", *map(str, config_files), str(config_file)]
    if shard is not None:
        arguments += ["--config", f"directions={{shard: {shard}}}"]
    return arguments


CONFIG_FILE_OPTIONS = ("--configfile", "--configfiles")


def split_config_files(extra: Sequence[str]) -> tuple[list[str], list[Path]]:
    """Snakemake's arguments given after `--` without their configuration files, and those
    files, absolute and each checked: ConfigError names the file, and the line and column of
    a YAML error (Snakemake's own message names neither)."""
    rest: list[str] = []
    files: list[Path] = []
    for argument, value in classified(extra, CONFIG_FILE_OPTIONS):
        if value is not None:
            files.append(Path(value))
        elif argument not in CONFIG_FILE_OPTIONS:
            rest.append(argument)
    for path in files:
        if not path.is_file():
            raise ConfigError(f"{path}: configuration file not found")
        load_yaml(path)
    return rest, [path.absolute() for path in files]


def paths_made_absolute(extra: Sequence[str], folder: Path) -> list[str]:
    """Snakemake's arguments given after `--`, with the paths in their configuration (files,
    `--config` items) made absolute where the command was typed, as the flags' are: a file
    that holds a relative one is replaced by a copy that holds it absolute, kept in the
    command's logs (`folder/logs/bouquet-eval/`), so that the Snakemake command printed works
    pasted anywhere. Files are checked first (split_config_files)."""
    rest, files = split_config_files(extra)
    arguments: list[str] = []
    for argument, value in classified(rest, CONFIG_ITEM_OPTIONS):
        if value is None:
            arguments.append(argument)
        elif argument == value:
            arguments.append(_item_made_absolute(value))
        else:  # --config=key=value
            arguments.append(f"{argument.partition('=')[0]}={_item_made_absolute(value)}")
    resolved = [_file_made_absolute(path, folder) for path in files]
    return arguments + (["--configfile", *map(str, resolved)] if resolved else [])


CONFIG_ITEM_OPTIONS = ("--config", "-C")


def _item_made_absolute(item: str) -> str:
    """`key=value` (Snakemake reads the value as YAML) with its paths made absolute."""
    key, equals, text = item.partition("=")
    try:
        value = yaml.safe_load(text) if equals else None
    except yaml.YAMLError:
        return item  # Snakemake takes it as a string: no path of ours
    resolved = given_paths_made_absolute({key: value}) if equals else {key: value}
    if resolved[key] == value:
        return item
    return f"{key}={json.dumps(resolved[key])}"


def _file_made_absolute(path: Path, folder: Path) -> Path:
    given = load_yaml(path)
    resolved = given_paths_made_absolute(given)
    if resolved == given:
        return path
    copy = folder / LOGS / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{path.name}"
    save(resolved, folder, copy, copy_of=path)
    return copy


def call_snakemake(arguments: list[str]) -> int:
    """Snakemake's main, in this process, returning its exit status."""
    from snakemake.cli import args_to_api, parse_args
    from snakemake.exceptions import print_exception

    # The workflow reads the command line (a dry run? which profiles?) from sys.argv.
    saved_argv = sys.argv[:]
    sys.argv[:] = ["snakemake", *arguments]
    try:
        parser, parsed = parse_args(arguments)
        return 0 if args_to_api(parsed, parser) else 1
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else 1
    except Exception as error:
        print_exception(error)
        return 1
    finally:
        sys.argv[:] = saved_argv


def run_command(
    command: str, args: argparse.Namespace, extra: Sequence[str], argv: Sequence[str]
) -> int:
    """Run `bouquet-eval <command> <argv>` (parsed as `args`; `extra` goes to Snakemake)."""
    if not SNAKEFILE.is_file():
        print(
            f"bouquet-eval: the workflow is not beside the package ({SNAKEFILE} not found): "
            "install bouquet-eval from a checkout of its repository (pip install -e .)",
            file=sys.stderr,
        )
        return 1
    earlier: list[Path] = []  # the configuration saved by an earlier command, once known
    try:
        folder = model_folder(args.output_dir)
        earlier.append(folder / SAVED_CONFIG)
        config = build_config(command, args, folder)
        # Before the configuration is printed or saved: the flags, or the configuration saved
        # by an earlier command, may hold a secret.
        refuse_secrets(config)
        extra = paths_made_absolute(extra, folder)
    except ConfigError as error:
        print(error_line(error, earlier), file=sys.stderr)
        return 1
    _say_the_command(["bouquet-eval", command, *argv], config)
    if args.dry_run:
        return _dry_run(command, args, folder, config, extra)
    saved = save(config, folder, targets=targets(command, sharded=False))
    arguments = snakemake_arguments(command, args, folder, saved, extra)
    return _logged_run(command, args, folder, arguments)


def _dry_run(
    command: str,
    args: argparse.Namespace,
    folder: Path,
    config: dict[str, Any],
    extra: Sequence[str],
) -> int:
    """Print the configuration and the plan; write nothing a later command reads. The
    configuration the plan is made from is kept among the command's logs, so that the
    Snakemake command printed can be pasted as it is."""
    shown = yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
    saved_as = folder / SAVED_CONFIG
    print(f"bouquet-eval: configuration (a real run saves it as {saved_as}, without the shard):")
    print(shown.rstrip())
    config_file = save(config, folder, _log_path(folder, command, args).with_suffix(".yaml"))
    arguments = snakemake_arguments(command, args, folder, config_file, extra)
    print(f"bouquet-eval: the same with Snakemake: snakemake {shlex.join(arguments)}", flush=True)
    return call_snakemake(arguments)


def _log_path(folder: Path, command: str, args: argparse.Namespace) -> Path:
    """This command's log: logs/bouquet-eval/<time>-<pid>-<command>[-shard..][-dry-run]."""
    shard = getattr(args, "shard", None)
    part = f"-shard{shard.replace('/', 'of')}" if shard else ""
    dry = "-dry-run" if getattr(args, "dry_run", False) else ""
    name = f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{command}{part}{dry}.log"
    log = folder / LOGS / name
    log.parent.mkdir(parents=True, exist_ok=True)
    return log


def _say_the_command(command: list[str], config: dict[str, Any]) -> None:
    """Tell the workflow, its console and its jobs that they run under `command`."""
    os.environ[COMMAND_VARIABLE] = json.dumps(redact_command(command, known_secrets(config)))


def run_leaderboard(
    args: argparse.Namespace, extra: Sequence[str], argv: Sequence[str] = ()
) -> int:
    """`bouquet-eval leaderboard RUNS`: the leaderboard of the models run into RUNS, then the
    report, in RUNS."""
    runs = Path(os.path.expanduser(args.runs)).absolute()
    try:
        config = runs_config(runs)
        if any(own_code(entry, config["metrics"]) for entry in config["models"]):
            # As `run` finds it, should a model's translations be redone.
            importable_from(config, Path.cwd())
        refuse_secrets(config)
        extra = paths_made_absolute(extra, runs)
    except ConfigError as error:
        print(error_line(error, []), file=sys.stderr)
        return 1
    _say_the_command(["bouquet-eval", "leaderboard", *argv], config)
    config_file = save(config, runs, runs / RUNS_CONFIG, targets=["results"])
    common = ["--snakefile", str(SNAKEFILE), "--directory", str(runs), "--cores", args.cores]
    return _logged_run(
        "leaderboard",
        args,
        runs,
        [*common, "results", *extra, "--configfile", str(config_file)],
        [*common, "--report", str(runs / REPORT), *extra, "--configfile", str(config_file)],
    )


REPORT = "report.html"
"""The report of `bouquet-eval leaderboard`, in the folder of runs."""


def _logged_run(command: str, args: argparse.Namespace, folder: Path, *arguments: list[str]) -> int:
    """Run Snakemake with each of `arguments` in turn, while they succeed, with its output in
    the command's log and what was selected, then the progress, on the console."""
    shard = getattr(args, "shard", None)
    log = _log_path(folder, command, args)
    selection_file = log.with_suffix(".selection.json")
    os.environ[SELECTION_FILE_VARIABLE] = str(selection_file)
    with _output_to(log) as stream:
        selection = SelectionLine(selection_file, stream)
        selection.start()
        # The workflow's console (its logger plugin, in this process) writes the progress.
        console.COMMAND_CONSOLE = console.CommandConsole(stream, selection.say)
        status = 0
        try:
            for each in arguments:
                status = status or call_snakemake(each)
        finally:
            console.COMMAND_CONSOLE = None
            selection.finish()
    selection_file.unlink(missing_ok=True)
    _report_end(command, folder, log, status, shard is not None)
    return status


@contextlib.contextmanager
def _output_to(log: Path) -> Iterator[TextIO]:
    """Send this process's and its children's stdout and stderr to `log`; yield the console."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    stream = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    with open(log, "ab") as handle:
        os.dup2(handle.fileno(), 1)
        os.dup2(handle.fileno(), 2)
        try:
            yield stream
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for descriptor in saved:
                os.close(descriptor)
            stream.close()


class SelectionLine(threading.Thread):
    """Writes what the run selected on the console as soon as the workflow has said it (in the
    file $BOUQUET_EVAL_SELECTION_FILE names), before any progress line."""

    def __init__(self, selection_file: Path, stream: TextIO) -> None:
        super().__init__(daemon=True)
        self.selection_file = selection_file
        self.stream = stream
        self.said = False
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.said and not self.stopping.wait(0.5):
            self.say()

    def say(self) -> None:
        with self.lock:
            if self.said or not self.selection_file.is_file():
                return
            selection = Selection(**json.loads(self.selection_file.read_text("utf-8")))
            self.stream.write(selection.line() + "\n")
            self.stream.flush()
            self.said = True
            if console.COMMAND_CONSOLE is not None:
                console.COMMAND_CONSOLE.spoken = time.monotonic()

    def finish(self) -> None:
        self.stopping.set()
        self.join()
        self.say()


def _report_end(command: str, folder: Path, log: Path, status: int, sharded: bool) -> None:
    if status != 0:
        for line in _failure_lines(log):
            print(line, file=sys.stderr)
        print(f"bouquet-eval: {command} failed; Snakemake's full log: {log}", file=sys.stderr)
        return
    if command == "leaderboard":
        board = folder / "leaderboard.md"
        print(board.read_text(encoding="utf-8").rstrip())
        print(f"bouquet-eval: leaderboard: {board} (and .csv); report: {folder / REPORT}")
        print(f"bouquet-eval: Snakemake's full log: {log}")
        return
    if command == "prefetch":
        print(f"bouquet-eval: fetched; what, at which commit: {folder / PREFETCH_LOG}")
        print(f"bouquet-eval: Snakemake's full log: {log}")
        return
    if command == "metaeval":
        print(f"bouquet-eval: agreement with people in {folder.parent / 'metaeval'}")
        print(f"bouquet-eval: Snakemake's full log: {log}")
        return
    print(f"bouquet-eval: results in {folder}")
    summary = folder / "summary.csv"
    if not sharded and command != "translate" and summary.is_file():
        print(f"bouquet-eval: {scores_line(folder.name, summary)}")
    print(f"bouquet-eval: Snakemake's full log: {log}")


def _failure_lines(log: Path, shown: int = 12) -> list[str]:
    """What the log says went wrong, each line once: the workflow's messages (among them each
    failed job with its log), the jobs' errors and Snakemake's "Error in rule" lines (shown
    when a --quiet of one's own lets Snakemake print its job blocks)."""
    found: dict[str, None] = {}
    for line in log.read_text("utf-8", errors="replace").splitlines():
        if line.startswith(("Error in rule", "bouquet-eval:")):
            if " selected (" not in line:
                found[line] = None
        elif " ERROR bouquet_eval: " in line:
            found["bouquet-eval: " + line.split(" ERROR bouquet_eval: ", 1)[1]] = None
    return list(found)[-shown:]


def scores_line(model: str, summary: Path) -> str:
    """The model's leaderboard line: each metric's average over the directions, with its
    bootstrap interval, from summary.csv."""
    import pandas as pd

    frame = pd.read_csv(summary)
    overall = frame[frame["group_by"] == "all"].iloc[0]
    metrics = [
        column.removesuffix("_ci_low") for column in frame.columns if column.endswith("_ci_low")
    ]
    shown = ", ".join(
        f"{metric} {overall[metric]:.2f} [{overall[f'{metric}_ci_low']:.2f}, "
        f"{overall[f'{metric}_ci_high']:.2f}]"
        for metric in metrics
    )
    return f"{model}: {shown} over {int(overall['n_directions'])} directions"
