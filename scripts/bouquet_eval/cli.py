"""`bouquet-eval`: the command line of the workflow, `translate | score | aggregate | run`.

Each workflow subcommand turns its flags into the workflow's configuration
(bouquet_eval.command_config), saves it beside the outputs and runs the workflow through
Snakemake (bouquet_eval.command_run). Subcommands are entries of `SUBCOMMANDS`: a name, a line
of help and a `main(argv) -> int`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

from bouquet_eval.command_config import BACKEND_FLAGS, CHAT_BACKENDS, DEFAULT_METRICS
from bouquet_eval.command_run import REPOSITORY, run_command
from bouquet_eval.config import load_yaml
from bouquet_eval.translators.backends import BACKENDS, DTYPES

WORKFLOW_SUBCOMMANDS = ("translate", "score", "aggregate", "run")

# What each subcommand takes, besides --output-dir and the workflow's options.
_SELECTS = ("translate", "score", "run")
_TRANSLATES = ("translate", "run")
_SCORES = ("score", "run")

FLAG_KEYS: dict[str, str] = {}
"""Every flag that sets the configuration -> the configuration key it sets (documentation and
tests read it)."""


def _setting_default(backend: str, setting: str) -> Any:
    return BACKENDS[backend].settings[setting].default


@cache
def _schema() -> dict[str, Any]:
    return load_yaml(REPOSITORY / "workflow" / "schemas" / "config.schema.yaml")


def _schema_default(section: str, key: str) -> Any:
    """The workflow's default of `section.key`, from its configuration schema."""
    return _schema()["properties"][section]["properties"][key]["default"]


class _Parser:
    """Adds flags to a subcommand's parser, each with its default and configuration key."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser

    def group(self, title: str) -> _Group:
        return _Group(self.parser.add_argument_group(title))


@dataclass
class _Group:
    group: argparse._ArgumentGroup

    def flag(
        self, *flags: str, help: str, default: Any = None, key: str | None = None, **kwargs: Any
    ) -> None:
        notes = []
        if default is not None:
            notes.append(f"default: {default}")
        if key is not None:
            notes.append(f"configuration: {key}")
            FLAG_KEYS[flags[0]] = key
        suffix = f" ({'; '.join(notes)})" if notes else ""
        self.group.add_argument(*flags, help=f"{help}{suffix}", **kwargs)


def _selection_flags(parser: _Parser, command: str) -> None:
    group = parser.group("direction selection (any combination; the last command's when none)")
    group.flag("--all", action="store_true", help="every direction of the dataset", default="off")
    group.flag(
        "--src-lang",
        action="append",
        metavar="LANG",
        help="keep directions out of LANG (repeatable)",
        default="every language",
        key="directions.src_langs",
    )
    group.flag(
        "--tgt-lang",
        action="append",
        metavar="LANG",
        help="keep directions into LANG (repeatable)",
        default="every language",
        key="directions.tgt_langs",
    )
    group.flag(
        "--directions",
        action="append",
        metavar="SRC-TGT,...",
        help="an explicit list, comma-separated (repeatable)",
        default="every direction",
        key="directions.list",
    )
    group.flag(
        "--shard",
        metavar="I/N",
        help="handle only directions [I::N] of the sorted selection; start N processes with "
        "0/N .. N-1/N on one --output-dir, then `bouquet-eval aggregate`",
        default="none",
        key="directions.shard (not saved)",
    )
    if command in _TRANSLATES:
        group.flag(
            "--limit",
            type=int,
            metavar="N",
            help="only the first N sentences of each direction",
            default="all",
            key="limit",
        )


def _translation_flags(parser: _Parser) -> None:
    group = parser.group("translation (--translator, or --backend and --model)")
    group.flag(
        "--backend",
        choices=CHAT_BACKENDS,
        help="vLLM's offline engine, or an OpenAI-compatible endpoint",
        default="vllm",
        key="models[0].translator",
    )
    group.flag(
        "--model",
        metavar="NAME",
        help="the model to load or ask for",
        default="none",
        key="models[0].model",
    )
    explained: dict[str, tuple[str, dict[str, Any]]] = {
        "--system-prompt": ("a system message before each prompt", {"metavar": "TEXT"}),
        "--temperature": ("sampling temperature (0: greedy)", {"type": float, "metavar": "T"}),
        "--seed": ("sampling seed", {"type": int, "metavar": "N"}),
        "--tensor-parallel-size": (
            "GPUs one copy of the model spans",
            {"type": int, "metavar": "N"},
        ),
        "--dtype": ("weights' type", {"choices": DTYPES}),
        "--max-model-len": ("context length (none: the model's)", {"type": int, "metavar": "N"}),
        "--gpu-memory-utilization": (
            "share of GPU memory vLLM may take",
            {"type": float, "metavar": "F"},
        ),
        "--deterministic": (
            "run-to-run reproducibility on the same hardware, at some speed",
            {"action": "store_true"},
        ),
        "--base-url": ("the endpoint (none: $OPENAI_BASE_URL, else OpenAI's)", {"metavar": "URL"}),
        "--api-key-env": ("the variable that holds the API key", {"metavar": "VARIABLE"}),
        "--concurrency": ("requests in flight at once", {"type": int, "metavar": "N"}),
    }
    for option in BACKEND_FLAGS:
        text, kwargs = explained[option.flag]
        default = _setting_default(option.backends[0], option.setting)
        group.flag(
            option.flag,
            help=f"{text}; --backend {' or '.join(option.backends)}",
            default="none" if default is None else default,
            key=f"models[0].{option.setting}",
            **kwargs,
        )
    group.flag(
        "--translator",
        metavar="PKG.MOD:NAME",
        help="a class or factory of your own, called with --translator-kwargs; "
        "bouquet_eval.translators.hf_seq2seq:{NLLB,Madlad,Aya}Translator are the built-in "
        "nllb, madlad and aya (--backend and --model are then ignored)",
        default="none",
        key="models[0].translator",
    )
    group.flag(
        "--translator-kwargs",
        metavar="JSON",
        help="a JSON object of the translator's arguments",
        default="{}",
        key="models[0].translator_kwargs, or the built-in's settings",
    )
    group.flag(
        "--prompt-fn",
        metavar="PKG.MOD:NAME",
        help="a function (src_lang, tgt_lang, src_text) -> prompt, or with --prompt-kwargs a "
        "factory returning one",
        default="the zero-shot template",
        key="models[0].prompt_fn",
    )
    group.flag(
        "--prompt-kwargs",
        metavar="JSON",
        help="a JSON object passed to the --prompt-fn factory",
        default="none: --prompt-fn is the function itself",
        key="models[0].prompt_kwargs",
    )


def _scoring_flags(parser: _Parser) -> None:
    group = parser.group("scoring")
    group.flag(
        "--metrics",
        metavar="LIST",
        help="comma-separated: chrf, metricx, glotlid, bleu, ter or pkg.mod:Name",
        default=",".join(DEFAULT_METRICS),
        key="metrics",
    )
    group.flag(
        "--metricx-model",
        metavar="NAME",
        help="MetricX-24 checkpoint (hub id or folder)",
        default=_schema_default("metricx", "model"),
        key="metricx.model",
    )
    group.flag(
        "--metricx-device",
        metavar="DEVICE",
        help="auto, cpu, cuda or cuda:N",
        default=_schema_default("metricx", "device"),
        key="metricx.device",
    )
    group.flag(
        "--metricx-qe",
        action="store_true",
        help="reference-free MetricX (quality estimation)",
        default="false",
        key="metricx.qe",
    )


def _dataset_flags(parser: _Parser) -> None:
    group = parser.group("dataset")
    group.flag(
        "--dataset-path",
        metavar="DIR",
        help="a local folder of <src>-<tgt>.parquet files instead of the hub",
        default="none",
        key="dataset.path",
    )
    group.flag(
        "--dataset-revision",
        metavar="REV",
        help="the dataset's git revision (pin a commit)",
        default=_schema_default("dataset", "revision"),
        key="dataset.revision",
    )


def _workflow_flags(parser: _Parser) -> None:
    group = parser.group("workflow (what follows `--` goes to Snakemake unchanged)")
    group.flag(
        "--output-dir",
        required=True,
        metavar="DIR",
        help="the model's folder: DIR/<src>-<tgt>.jsonl, DIR/scores.csv, DIR/manifest.json, "
        "...; its name names the model",
        default="required",
        key="output_dir (its parent) and models[0].name (its name)",
    )
    group.flag(
        "-n",
        "--dry-run",
        action="store_true",
        help="print the configuration and the plan only",
        default="off",
    )
    group.flag(
        "--profile",
        metavar="NAME",
        help="a Snakemake profile: a folder, or the name of one in the repository's profiles/ "
        "(e.g. slurm)",
        default="the workflow's own (workflow/profiles/default)",
    )
    group.flag("--cores", metavar="N", help="cores to use", default="all")
    group.flag(
        "--jobs",
        metavar="N",
        help="jobs at once (with a cluster profile: jobs submitted at once)",
        default="as many as --cores allows",
    )
    group.flag(
        "--keep-going",
        action="store_true",
        help="go on with independent jobs after a failure",
        default="off",
    )


def build_parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"bouquet-eval {command}",
        description=SUBCOMMAND_HELP[command],
        epilog="Every flag is a key of the workflow configuration (config/README.md); the "
        "configuration is saved as DIR/bouquet-eval.yaml, and flags left out come from it.",
    )
    flags = _Parser(parser)
    if command in _SELECTS:
        _selection_flags(flags, command)
    if command in _TRANSLATES:
        _translation_flags(flags)
    if command in _SCORES:
        _scoring_flags(flags)
    if command in _SELECTS:
        _dataset_flags(flags)
    _workflow_flags(flags)
    return parser


SUBCOMMAND_HELP = {
    "translate": "Translate the selected directions.",
    "score": "Score the translations in --output-dir (aggregating them when --shard is absent).",
    "aggregate": "Aggregate a model's scores: scores.csv, scored_rows.parquet, manifest.json.",
    "run": "Translate and score (and aggregate when --shard is absent).",
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


SUBCOMMANDS: dict[str, Subcommand] = {
    name: Subcommand(SUBCOMMAND_HELP[name], partial(run_workflow_command, name))
    for name in WORKFLOW_SUBCOMMANDS
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
