"""`bouquet-eval`: the command line of the workflow, `translate | score | aggregate | run |
prefetch`, `leaderboard` over a folder of runs, and `browse`, the sentence browser over a run's
outputs.

Each workflow subcommand turns its flags into the workflow's configuration
(bouquet_eval.command.config), saves it beside the outputs and runs the workflow through
Snakemake (bouquet_eval.command.run). Subcommands are entries of `SUBCOMMANDS`: a name, a line
of help and a `main(argv) -> int`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

from bouquet_eval.command.config import BACKEND_FLAGS, CHAT_BACKENDS, DEFAULT_METRICS
from bouquet_eval.command.run import REPOSITORY, run_command, run_leaderboard
from bouquet_eval.metrics.records import RECORDS, SHARED_ENVIRONMENTS
from bouquet_eval.planning.schema import load_schema
from bouquet_eval.translators.backends import BACKENDS, DTYPES

WORKFLOW_SUBCOMMANDS = ("translate", "score", "aggregate", "run", "prefetch", "metaeval")

# What each subcommand takes, besides --output-dir and the workflow's options.
_SELECTS = ("translate", "score", "run", "prefetch")
_TRANSLATES = ("translate", "run", "prefetch")
_SCORES = ("score", "run", "prefetch", "metaeval")
_JUDGES = ("metaeval",)


def _setting_default(backend: str, setting: str) -> Any:
    default = BACKENDS[backend].settings[setting].default
    return "none" if default is None else default


@cache
def _schema() -> dict[str, Any]:
    """The configuration schema, completed (a metric's settings come from its record)."""
    return load_schema(REPOSITORY / "workflow" / "schemas" / "config.schema.yaml")


def _schema_default(section: str, key: str) -> Any:
    """The workflow's default of `section.key`, from its configuration schema."""
    return _schema()["properties"][section]["properties"][key]["default"]


@dataclass(frozen=True)
class Flag:
    """A flag: its names, what it does, its default as shown, the configuration key it sets
    (None: a Snakemake option) and argparse's keywords."""

    names: tuple[str, ...]
    help: str
    default: Any
    key: str | None
    options: dict[str, Any]
    only: tuple[str, ...] = WORKFLOW_SUBCOMMANDS
    """The subcommands that take it (of those that take its group)."""

    def add_to(self, group: argparse._ArgumentGroup) -> None:
        key = f"; configuration: {self.key}" if self.key else ""
        group.add_argument(
            *self.names, help=f"{self.help} (default: {self.default}{key})", **self.options
        )


def _flag(
    *names: str,
    help: str,
    default: Any,
    key: str | None = None,
    only: tuple[str, ...] = WORKFLOW_SUBCOMMANDS,
    **options: Any,
) -> Flag:
    return Flag(names, help, default, key, options, only)


_SWITCH: dict[str, Any] = {"action": "store_true"}

_SELECTION = (
    _flag("--all", help="every direction of the dataset", default="off", **_SWITCH),
    _flag("--src-lang", help="keep directions out of LANG (repeatable)", default="every language",
          key="directions.src_langs", action="append", metavar="LANG"),
    _flag("--tgt-lang", help="keep directions into LANG (repeatable)", default="every language",
          key="directions.tgt_langs", action="append", metavar="LANG"),
    _flag("--directions", help="an explicit list, comma-separated (repeatable)",
          default="every direction", key="directions.list", action="append",
          metavar="SRC-TGT,..."),
    _flag("--shard", help="handle only directions [I::N] of the sorted selection; start N "
          "processes with 0/N .. N-1/N on one --output-dir, then `bouquet-eval aggregate`",
          default="none", key="directions.shard (not saved)", metavar="I/N"),
    _flag("--limit", help="only the first N sentences of each direction", default="all",
          key="limit", only=_TRANSLATES, type=int, metavar="N"),
)  # fmt: skip

_BACKEND_FLAG_HELP: dict[str, tuple[str, dict[str, Any]]] = {
    "--system-prompt": ("a system message before each prompt", {"metavar": "TEXT"}),
    "--temperature": ("sampling temperature (0: greedy)", {"type": float, "metavar": "T"}),
    "--seed": ("sampling seed", {"type": int, "metavar": "N"}),
    "--tensor-parallel-size": ("GPUs one copy of the model spans", {"type": int, "metavar": "N"}),
    "--dtype": ("weights' type", {"choices": DTYPES}),
    "--max-model-len": ("context length (none: the model's)", {"type": int, "metavar": "N"}),
    "--gpu-memory-utilization": (
        "share of GPU memory vLLM may take",
        {"type": float, "metavar": "F"},
    ),
    "--deterministic": ("run-to-run reproducibility on the same hardware, at some speed", _SWITCH),
    "--base-url": ("the endpoint (none: $OPENAI_BASE_URL, else OpenAI's)", {"metavar": "URL"}),
    "--api-key-env": ("the variable that holds the API key", {"metavar": "VARIABLE"}),
    "--concurrency": ("requests in flight at once", {"type": int, "metavar": "N"}),
}

_TRANSLATION = (
    _flag("--backend", help="vLLM's offline engine, or an OpenAI-compatible endpoint",
          default="vllm", key="models[0].translator", choices=CHAT_BACKENDS),
    _flag("--model", help="the model to load or ask for", default="none",
          key="models[0].model", metavar="NAME"),
    *(
        _flag(option.flag,
              help=f"{_BACKEND_FLAG_HELP[option.flag][0]}; --backend "
              f"{' or '.join(option.backends)}",
              default=_setting_default(option.backends[0], option.setting),
              key=f"models[0].{option.setting}", **_BACKEND_FLAG_HELP[option.flag][1])
        for option in BACKEND_FLAGS
    ),
    _flag("--translator", help="a class or factory of your own, called with "
          "--translator-kwargs; bouquet_eval.translators.hf_seq2seq:{NLLB,Madlad,Aya}Translator "
          "are the built-in nllb, madlad and aya (--backend and --model are then ignored)",
          default="none", key="models[0].translator", metavar="PKG.MOD:NAME"),
    _flag("--translator-kwargs", help="a JSON object of the translator's arguments",
          default="{}", key="models[0].translator_kwargs, or the built-in's settings",
          metavar="JSON"),
    _flag("--prompt-fn", help="a function (src_lang, tgt_lang, src_text) -> prompt, or with "
          "--prompt-kwargs a factory returning one", default="the zero-shot template",
          key="models[0].prompt_fn", metavar="PKG.MOD:NAME"),
    _flag("--prompt-kwargs", help="a JSON object passed to the --prompt-fn factory",
          default="none: --prompt-fn is the function itself", key="models[0].prompt_kwargs",
          metavar="JSON"),
)  # fmt: skip


def _metric_flags() -> tuple[Flag, ...]:
    """The flags of every built-in metric's models, device and reference-free switch, from its
    record (`MetricRecord.flags`: `--metricx-model`, `--blaser-encoder`, `--comet-device`)."""
    flags = []
    for name, record in RECORDS.items():
        settings = record.settings or {}
        what = record.summary.split(":")[0]
        for flag, setting in record.flags():
            if setting == record.qe_setting:
                kind: dict[str, Any] = {"help": "reference-free (quality estimation)", **_SWITCH}
            elif setting == record.device_setting:
                kind = {"help": "auto, cpu, cuda or cuda:N", "metavar": "DEVICE"}
            else:
                kind = {"help": f"{what}: its {setting} (hub id, or a path where the command is "
                        "typed)", "metavar": "NAME"}  # fmt: skip
            flags.append(
                _flag(flag, default=settings[setting]["default"], key=f"{name}.{setting}", **kind)
            )
    return tuple(flags)


def _own_environments() -> str:
    """The environments of metrics whose packages cannot live beside the workflow's, and
    their metrics: "comet for comet, cometkiwi, xcomet; blaser for ..."."""
    environments: dict[str, list[str]] = {}
    for name, record in RECORDS.items():
        if record.environment not in SHARED_ENVIRONMENTS:
            environments.setdefault(record.environment, []).append(name)
    return "; ".join(f"{env} for {', '.join(names)}" for env, names in environments.items())


_SCORING = (
    _flag("--metrics", help=f"comma-separated: {', '.join(RECORDS)} (docs/metrics.md), or "
          "pkg.mod:Name of your own", default=",".join(DEFAULT_METRICS), key="metrics",
          metavar="LIST"),
    *_metric_flags(),
    _flag("--environment", help="the Python of the software environment a family of metrics "
          "runs in (repeatable), e.g. comet=.venv-comet/bin/python, for the metrics whose "
          f"packages cannot live beside the workflow's: {_own_environments()} "
          "(docs/metrics.md#score-jobs)",
          default="Snakemake's own Python", key="environments.NAME", action="append",
          metavar="NAME=PYTHON"),
)  # fmt: skip

_DATASET = (
    _flag("--dataset-path", help="a local folder of <src>-<tgt>.parquet files instead of the hub",
          default="none", key="dataset.path", metavar="DIR"),
    _flag("--dataset-revision", help="the dataset's git revision (pin a commit)",
          default=_schema_default("dataset", "revision"), key="dataset.revision", metavar="REV"),
)  # fmt: skip

_WORKFLOW = (
    _flag("--output-dir", help="the model's folder: DIR/<src>-<tgt>.jsonl, DIR/scores.csv, "
          "DIR/manifest.json, ...; its name names the model", default="required",
          key="output_dir (its parent) and models[0].name (its name)", required=True,
          metavar="DIR"),
    _flag("-n", "--dry-run", help="print the configuration and the plan only", default="off",
          **_SWITCH),
    _flag("--profile", help="a Snakemake profile: a folder, or the name of one in the "
          "repository's profiles/ (e.g. slurm)",
          default="the workflow's own, workflow/profiles/default", metavar="NAME"),
    _flag("--cores", help="cores to use", default="all", metavar="N"),
    _flag("--jobs", help="jobs at once (with a cluster profile: jobs submitted at once)",
          default="as many as --cores allows", metavar="N"),
    _flag("--keep-going", help="go on with independent jobs after a failure", default="off",
          **_SWITCH),
)  # fmt: skip

_METAEVAL = (
    _flag("--judgements", help="the human judgements: a parquet, CSV, TSV or JSON Lines table, "
          "or met-bouquet (docs/metaeval.md)", default="the saved configuration's",
          key="metaeval.judgements", metavar="FILE"),
    _flag("--judgements-revision", help="Met-BOUQuET's git revision (pin a commit)",
          default=_schema_default("metaeval", "revision"), key="metaeval.revision",
          metavar="REV"),
)  # fmt: skip

GROUPS: tuple[tuple[str, tuple[str, ...], tuple[Flag, ...]], ...] = (
    ("direction selection (any combination; the last command's when none)", _SELECTS, _SELECTION),
    ("translation (--translator, or --backend and --model)", _TRANSLATES, _TRANSLATION),
    ("scoring", _SCORES, _SCORING),
    ("dataset", (*_SELECTS, "metaeval"), _DATASET),
    ("human judgements", _JUDGES, _METAEVAL),
    ("workflow (what follows `--` goes to Snakemake unchanged)", WORKFLOW_SUBCOMMANDS, _WORKFLOW),
)
"""Each group of flags: its title, the subcommands that take it, its flags."""

FLAG_KEYS = {flag.names[0]: flag.key for _, _, flags in GROUPS for flag in flags if flag.key}
"""Every flag that sets the configuration -> the configuration key it sets."""


def build_parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"bouquet-eval {command}",
        description=SUBCOMMAND_HELP[command],
        epilog="Every flag is a key of the workflow configuration (config/README.md); the "
        "configuration is saved as DIR/bouquet-eval.yaml, and flags left out come from it.",
    )
    for title, commands, flags in GROUPS:
        if command in commands:
            group = parser.add_argument_group(title)
            for flag in flags:
                if command in flag.only:
                    flag.add_to(group)
    return parser


SUBCOMMAND_HELP = {
    "translate": "Translate the selected directions.",
    "score": "Score the translations in --output-dir (aggregating them when --shard is absent).",
    "aggregate": "Aggregate a model's scores: scores.csv, scored_rows.parquet, manifest.json.",
    "run": "Translate and score (and aggregate when --shard is absent).",
    "prefetch": "Fetch the dataset, models and tokenizers that the run would read from the "
    "Hugging Face Hub into the local cache (on a machine with network access), for runs "
    "without network.",
    "metaeval": "Which metric agrees with people: score human-judged translations with the "
    "metrics and write <parent of --output-dir>/metaeval/correlations.csv.",
}


def run_workflow_command(command: str, argv: Sequence[str]) -> int:
    own, snakemake_args = _split(argv)
    arguments = build_parser(command).parse_args(own)
    return run_command(command, arguments, snakemake_args, argv)


def _split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The command's own arguments, and Snakemake's (after `--`)."""
    argv = list(argv)
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1 :]
    return argv, []


@dataclass(frozen=True)
class Subcommand:
    help: str
    main: Callable[[Sequence[str]], int]


def leaderboard(argv: Sequence[str]) -> int:
    own, snakemake_args = _split(argv)
    parser = argparse.ArgumentParser(
        prog="bouquet-eval leaderboard",
        description=LEADERBOARD_HELP,
        epilog="What follows `--` goes to Snakemake unchanged.",
    )
    parser.add_argument(
        "runs", help="the folder the models were run into (each --output-dir RUNS/<model>)"
    )
    parser.add_argument("--cores", default="all", help="cores to use (default: all)")
    return run_leaderboard(parser.parse_args(own), snakemake_args, argv)


LEADERBOARD_HELP = (
    "Rank the models run into a folder (RUNS/<model>, each with its bouquet-eval.yaml) side "
    "by side: RUNS/leaderboard.md and .csv, and the HTML report RUNS/report.html."
)


def browse(argv: Sequence[str]) -> int:
    # Imported here: the server's modules are not needed by the workflow's subcommands.
    from bouquet_eval.results.browse import main as browse_main

    return browse_main(list(argv))


SUBCOMMANDS: dict[str, Subcommand] = {
    **{
        name: Subcommand(SUBCOMMAND_HELP[name], partial(run_workflow_command, name))
        for name in WORKFLOW_SUBCOMMANDS
    },
    "leaderboard": Subcommand(LEADERBOARD_HELP, leaderboard),
    "browse": Subcommand("Serve every sentence of a run's output folder on 127.0.0.1.", browse),
}


def top_level_help() -> str:
    lines = [
        "usage: bouquet-eval {" + ",".join(SUBCOMMANDS) + "} [flags] [-- snakemake arguments]",
        "",
        "Reproduce BOUQuET benchmark numbers for any model, with the bouquet-eval workflow.",
        "",
        "subcommands:",
        *(f"  {name:<10} {entry.help}" for name, entry in SUBCOMMANDS.items()),
        "",
        "Flags of `run` (translate takes the translation flags, score the scoring flags,",
        "aggregate only --output-dir and the workflow flags):",
        "",
        build_parser("run").format_help(),
        "",
        "Flags of `metaeval`, besides the scoring, dataset and workflow flags:",
        "",
        *(
            f"  {' '.join(flag.names)}: {flag.help} (default: {flag.default}; configuration: "
            f"{flag.key})"
            for flag in _METAEVAL
        ),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(top_level_help())
        return 0 if argv else 2
    entry = SUBCOMMANDS.get(argv[0])
    if entry is None:
        print(
            f"bouquet-eval: unknown subcommand '{argv[0]}' (one of: {', '.join(SUBCOMMANDS)})",
            file=sys.stderr,
        )
        return 2
    return entry.main(argv[1:])
