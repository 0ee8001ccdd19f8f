"""The workflow configuration that a `bouquet-eval` command line stands for.

`--output-dir DIR` is one model's folder: the configuration names the model after the folder and
puts the workflow's outputs in its parent, so that the workflow, run with DIR as its working
directory, writes `DIR/<src>-<tgt>.jsonl`, `DIR/scores.csv` and so on. What the flags give wins;
what they leave out comes from the configuration saved beside the outputs by the previous
command (`DIR/bouquet-eval.yaml`), else from the workflow's defaults. The saved file is the
whole run's configuration, without `--shard`: plain Snakemake reproduces the run from it.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bouquet_eval.core.config import ConfigError, load_yaml
from bouquet_eval.core.home import snakefile, workflow_home
from bouquet_eval.core.io import atomic_path, json_reason
from bouquet_eval.data.judgements import MET_BOUQUET
from bouquet_eval.metrics.records import RECORDS
from bouquet_eval.planning.channel import MODEL_KEYED, declared_settings, shared_settings
from bouquet_eval.planning.schema import load_schema, validate_config
from bouquet_eval.planning.sharding import parse_part
from bouquet_eval.translators.backends import BACKENDS, ENTRY_PROPERTIES

SAVED_CONFIG = "bouquet-eval.yaml"
"""The configuration of the last command, in the model's folder."""

RUNS_CONFIG = "bouquet-eval-leaderboard.yaml"
"""In a folder of runs: the configuration that ranks its models side by side."""

DEFAULT_METRICS = ("chrf", "metricx", "glotlid")
"""The benchmark's metrics, which the command computes unless told otherwise."""

CHAT_BACKENDS = ("vllm", "openai")

_NAME_PATTERN = re.compile(ENTRY_PROPERTIES["name"]["pattern"])
"""What a model's name may be (the folder's name names it)."""


@dataclass(frozen=True)
class BackendFlag:
    """A flag that sets one setting of the chat backends' model entries."""

    flag: str
    setting: str
    backends: tuple[str, ...]

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")


BACKEND_FLAGS = (
    BackendFlag("--system-prompt", "system_prompt", CHAT_BACKENDS),
    BackendFlag("--temperature", "temperature", CHAT_BACKENDS),
    BackendFlag("--seed", "seed", CHAT_BACKENDS),
    BackendFlag("--tensor-parallel-size", "tensor_parallel_size", ("vllm",)),
    BackendFlag("--dtype", "dtype", ("vllm",)),
    BackendFlag("--max-model-len", "max_model_len", ("vllm",)),
    BackendFlag("--gpu-memory-utilization", "gpu_memory_utilization", ("vllm",)),
    BackendFlag("--deterministic", "deterministic", ("vllm",)),
    BackendFlag("--base-url", "base_url", ("openai",)),
    BackendFlag("--api-key-env", "api_key_env", ("openai",)),
    BackendFlag("--concurrency", "concurrency", ("openai",)),
)


def model_folder(output_dir: str | os.PathLike[str]) -> Path:
    """The model's folder, absolute; its name names the model in the configuration."""
    folder = Path(os.path.expanduser(os.fspath(output_dir))).absolute()
    if not _NAME_PATTERN.match(folder.name):
        raise ConfigError(
            f"--output-dir '{output_dir}': the folder's name '{folder.name}' names the model and "
            "may hold only letters, digits, '.', '_' and '-' (not first)"
        )
    return folder


def load_saved(folder: Path) -> dict[str, Any] | None:
    path = folder / SAVED_CONFIG
    return load_yaml(path) if path.is_file() else None


def save(
    config: Mapping[str, Any],
    folder: Path,
    path: Path | None = None,
    copy_of: Path | None = None,
    targets: Sequence[str] = (),
) -> Path:
    """Write the run's configuration beside its outputs (or as `path`), without the shard,
    atomically: shard processes started together write the same file; its first lines give
    the `snakemake` command that runs its `targets` again, from any folder. `copy_of`: the
    file given to the command that this is a copy of, its paths made absolute."""
    whole = copy.deepcopy(dict(config))
    whole.get("directions", {}).pop("shard", None)
    path = path or folder / SAVED_CONFIG
    command = shlex.join(
        ["snakemake", "-s", snakefile(), "-d", str(folder), *targets, "--cores", "all",
         "--configfile", str(path)]
    )  # fmt: skip
    header = (
        f"# {copy_of}, with its paths made absolute where bouquet-eval was typed\n"
        if copy_of
        else f"# Written by bouquet-eval; reproduce the run with Snakemake:\n#   {command}\n"
    )
    with atomic_path(path) as partial:
        partial.write_text(
            header + yaml.safe_dump(whole, sort_keys=False, allow_unicode=True), encoding="utf-8"
        )
    return path


def json_object(flag: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{flag}: column {error.colno}: {json_reason(error)}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{flag}: expected a JSON object such as '{{\"k\": 4}}'")
    return value


def _given(args: Any, name: str) -> Any:
    return getattr(args, name, None)


def model_entry(args: Any, name: str) -> dict[str, Any] | None:
    """The model entry the translation flags describe; None when they name no translator."""
    if _given(args, "translator"):
        entry = _custom_translator(args, name)
    elif _given(args, "model"):
        entry = _chat_backend(args, name)
    else:
        return None
    return _paths_made_absolute(entry)


def where_typed(value: str) -> str:
    """A path as the user typed it, absolute: the workflow's jobs run in the model's folder,
    not where the command was started. `~` is expanded."""
    return str(Path(os.path.expanduser(value)).absolute())


def _is_path(value: str) -> bool:
    """A command-line value that names a file or folder relative to where the command was
    started: written as one (`./x`, `../x`, `~/x`), or naming one that exists there. Hub ids
    and other words name none (a folder `org/model` beside the command is read first, as
    transformers and vLLM read it); absolute paths need nothing."""
    written_as_path = value in (".", "..") or value.startswith(("./", "../", "~/"))
    return written_as_path or (bool(value) and Path(value).exists())


def _absolute_paths(value: Any) -> Any:
    """`value` with every string in it that names a path made absolute (see `_is_path`)."""
    if isinstance(value, str):
        return where_typed(value) if _is_path(value) else value
    if isinstance(value, dict):
        return {key: _absolute_paths(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_absolute_paths(item) for item in value]
    return value


def _paths_made_absolute(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry with the paths the user gave made absolute: a local model folder, and the
    paths in the arguments of a translator or prompt function of one's own (an index of
    examples, a glossary, ...). An API model's name is the server's and stays as it is."""
    backend = BACKENDS.get(entry["translator"])
    entry = dict(entry)
    for key in ("translator_kwargs", "prompt_kwargs", "engine_args"):
        if key in entry:
            entry[key] = _absolute_paths(entry[key])
    if backend is not None and backend.hub_model and isinstance(entry.get("model"), str):
        entry["model"] = _absolute_paths(entry["model"])
    return entry


def given_paths_made_absolute(given: Mapping[str, Any]) -> dict[str, Any]:
    """A part of the configuration given to the command itself (a file or a `--config` item
    after `--`), with every path in it made absolute where the command was typed, as the
    flags' are: the dataset, judgements, received submissions, environments' Pythons,
    `python_path`, the models' paths and their translators' and prompt functions' arguments
    (see `_paths_made_absolute`), and the models the metrics load
    (`MetricRecord.model_settings`) where they name a path (written as one or existing there,
    not a hub id)."""
    config = copy.deepcopy(dict(given))

    def always(value: Any) -> Any:
        return where_typed(value) if isinstance(value, str) else value

    if isinstance(config.get("dataset"), dict) and config["dataset"].get("path"):
        config["dataset"]["path"] = always(config["dataset"]["path"])
    metaeval = config.get("metaeval")
    if isinstance(metaeval, dict) and metaeval.get("judgements") not in (None, MET_BOUQUET):
        metaeval["judgements"] = always(metaeval["judgements"])
    if isinstance(config.get("environments"), dict):
        config["environments"] = {k: always(v) for k, v in config["environments"].items()}
    for key in ("python_path", "submissions"):
        if isinstance(config.get(key), list):
            config[key] = [always(value) for value in config[key]]
    if isinstance(config.get("models"), list):
        config["models"] = [
            _model_paths_made_absolute(entry) if isinstance(entry, dict) else entry
            for entry in config["models"]
        ]
    for name, record in RECORDS.items():
        section = config.get(name)
        if isinstance(section, dict):
            for setting in record.model_settings:
                if isinstance(section.get(setting), str):
                    section[setting] = _absolute_paths(section[setting])
    return config


def _model_paths_made_absolute(entry: dict[str, Any]) -> dict[str, Any]:
    """A model entry given in a file: its paths, and those of `path` (translations brought)."""
    entry = _paths_made_absolute(entry) if isinstance(entry.get("translator"), str) else entry
    if isinstance(entry.get("path"), str):
        entry = {**entry, "path": where_typed(entry["path"])}
    return entry


def _prompt_settings(args: Any, own_prompt_fn: str | None = None) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    prompt_fn = _given(args, "prompt_fn")
    if prompt_fn and prompt_fn != own_prompt_fn:
        settings["prompt_fn"] = prompt_fn
    if _given(args, "prompt_kwargs") is not None:
        if not prompt_fn:
            raise ConfigError("--prompt-kwargs: give --prompt-fn, the factory they are passed to")
        settings["prompt_kwargs"] = json_object("--prompt-kwargs", args.prompt_kwargs)
        settings["prompt_fn"] = prompt_fn
    return settings


def _custom_translator(args: Any, name: str) -> dict[str, Any]:
    """`--translator pkg.mod:Name`. The Hugging Face adapters the project ships are its
    built-in translators (their settings checked, their GPUs and environment known)."""
    kwargs = (
        json_object("--translator-kwargs", args.translator_kwargs)
        if _given(args, "translator_kwargs") is not None
        else {}
    )
    built_in = next(
        (key for key, backend in BACKENDS.items() if backend.factory == args.translator), None
    )
    if built_in is not None:
        own_prompt_fn = BACKENDS[built_in].prompt_fn
        return {
            "name": name,
            "translator": built_in,
            **kwargs,
            **_prompt_settings(args, own_prompt_fn),
        }
    entry: dict[str, Any] = {"name": name, "translator": args.translator}
    if kwargs:
        entry["translator_kwargs"] = kwargs
    return {**entry, **_prompt_settings(args)}


def _chat_backend(args: Any, name: str) -> dict[str, Any]:
    backend = _given(args, "backend") or "vllm"
    entry: dict[str, Any] = {"name": name, "translator": backend, "model": args.model}
    for option in BACKEND_FLAGS:
        value = _given(args, option.dest)
        if value is None or value is False:
            continue
        if backend not in option.backends:
            raise ConfigError(f"{option.flag} applies to --backend {' or '.join(option.backends)}")
        entry[option.setting] = value
    return {**entry, **_prompt_settings(args)}


def selection(args: Any) -> dict[str, Any] | None:
    """`directions` from the selection flags; None when none is given."""
    src = _given(args, "src_lang") or []
    tgt = _given(args, "tgt_lang") or []
    listed = [
        name.strip()
        for value in _given(args, "directions") or []
        for name in value.split(",")
        if name.strip()
    ]
    if not (_given(args, "all") or src or tgt or listed):
        return None
    return {"src_langs": src, "tgt_langs": tgt, "list": list(dict.fromkeys(listed))}


def translations_in(folder: Path) -> list[str]:
    """The directions of the translations someone put in the folder."""
    return sorted(path.name.removesuffix(".jsonl") for path in folder.glob("*-*.jsonl"))


def build_config(command: str, args: Any, folder: Path) -> dict[str, Any]:
    """The workflow configuration of `bouquet-eval <command>` with these flags."""
    saved = load_saved(folder)
    config: dict[str, Any] = copy.deepcopy(saved) if saved else {}
    config["output_dir"] = ".."
    # One translate and one score job per model (and per --shard): the model loads once.
    config["shards"] = 1
    dataset = config.setdefault("dataset", {})
    if _given(args, "dataset_path"):
        dataset["path"] = where_typed(args.dataset_path)
    if _given(args, "dataset_revision"):
        dataset["revision"] = args.dataset_revision
    model = model_entry(args, folder.name)
    if model is not None:
        config["models"] = [model]
    elif not saved and command == "metaeval":
        # Meta-evaluation scores the judged systems only; the workflow wants one model, and
        # the reference bound needs nothing (no job of it runs for the metaeval target).
        config["models"] = [{"name": folder.name, "translator": "reference"}]
        config.setdefault("directions", {})
    elif not saved:
        if command in ("translate", "run"):
            raise ConfigError(
                "name a translator: --backend {vllm,openai} --model NAME, or --translator "
                "pkg.module:Name"
            )
        # Translations brought by the user, scored where they are.
        config["models"] = [{"name": folder.name, "translator": "provided", "path": "."}]
    directions = selection(args)
    if directions is None and not saved and command != "metaeval":
        found = translations_in(folder) if command in ("score", "aggregate") else []
        if not found:
            raise ConfigError(
                f"select directions with --all, --src-lang, --tgt-lang or --directions "
                f"(no {SAVED_CONFIG} of an earlier run in {folder})"
            )
        directions = {"src_langs": [], "tgt_langs": [], "list": found}
    if directions is not None:
        config["directions"] = directions
    if _given(args, "shard"):
        parse_part(args.shard)
        config.setdefault("directions", {})["shard"] = args.shard
    if _given(args, "limit") is not None:
        config["limit"] = args.limit
    config.setdefault("metrics", list(DEFAULT_METRICS))
    if _given(args, "metrics"):
        config["metrics"] = [name.strip() for name in args.metrics.split(",") if name.strip()]
    if own_code(model or {}, config["metrics"] if _given(args, "metrics") else []):
        # Found where the command was typed, by this run and by later ones started elsewhere.
        importable_from(config, Path.cwd())
    config.setdefault("metricx", {})
    _metric_settings(args, config)
    for given in _given(args, "environment") or []:
        name, equals, python = given.partition("=")
        if not (equals and name and python):
            raise ConfigError(
                f"--environment '{given}': expected NAME=PYTHON, e.g. comet=.venv/bin/python"
            )
        config.setdefault("environments", {})[name] = where_typed(python)
    metaeval = config.setdefault("metaeval", {})
    judgements = _given(args, "judgements")
    if judgements:
        # Snakemake runs in the model's folder: a path is made absolute where it was given.
        metaeval["judgements"] = (
            judgements
            if judgements == MET_BOUQUET
            else str(Path(os.path.expanduser(judgements)).absolute())
        )
    if _given(args, "judgements_revision"):
        metaeval["revision"] = args.judgements_revision
    return config


def own_code(entry: Mapping[str, Any], metrics: Sequence[str]) -> list[str]:
    """The objects of one's own (`package.module:name`, not the workflow's) that a model entry
    and a list of metrics name: translator, prompt function, metrics."""
    named = [entry.get("translator"), entry.get("prompt_fn"), *metrics]
    return [
        spec
        for spec in named
        if isinstance(spec, str) and ":" in spec and not spec.startswith(f"{PACKAGE}.")
    ]


PACKAGE = "bouquet_eval"


def importable_from(config: dict[str, Any], folder: Path) -> None:
    """Put `folder` first in the configuration's `python_path`, where code of one's own is
    imported from, unless it is there."""
    folders = config.setdefault("python_path", [])
    if str(folder) not in folders:
        folders.insert(0, str(folder))


def _metric_settings(args: Any, config: dict[str, Any]) -> None:
    """The settings the metrics' flags give (`MetricRecord.flags`; a model's path made
    absolute where the command was typed)."""
    for name, record in RECORDS.items():
        for flag, setting in record.flags():
            value = _given(args, flag.removeprefix("--").replace("-", "_"))
            if value is None or value is False:
                continue
            section = config.setdefault(name, {})
            section[setting] = _absolute_paths(value) if setting in record.model_settings else value


def runs_config(runs: Path) -> dict[str, Any]:
    """The configuration that ranks, side by side, every model that `bouquet-eval` ran into a
    folder of `runs` (each `<runs>/<model>/bouquet-eval.yaml`): their entries and their own
    settings (`prices`), and what they share. Their outputs are current, so only the
    leaderboard and the report are made.

    What they share is what the leaderboard's jobs, and those whose outputs it reads, receive
    of the configuration, besides each model's own settings, and the sentences
    (`channel.shared_settings`): runs that differ in any of it are refused before any job
    runs, naming the setting, both values and both folders; runs that differ only in what none
    of those jobs reads (resources, comparisons, verification, ...) are ranked together, with
    the first folder's."""
    saved = sorted(runs.glob(f"*/{SAVED_CONFIG}"))
    if not saved:
        raise ConfigError(
            f"{runs}: no <model>/{SAVED_CONFIG}: run models into it first, e.g. "
            f"`bouquet-eval run ... --output-dir {runs / '<model>'}`"
        )
    home = workflow_home()
    if home is None:
        raise ConfigError(
            "bouquet-eval: no checkout of the workflow, whose schema says what runs share"
        )
    schema = load_schema(home / "workflow" / "schemas" / "config.schema.yaml")
    settings = declared_settings(schema)
    configs = [(path, load_yaml(path)) for path in saved]
    shared = []
    for path, config in configs:
        try:
            validated = validate_config(copy.deepcopy(config), schema)
        except ConfigError as error:
            raise ConfigError(f"{path}: {error}", error.key) from None
        shared.append(
            {key: value for key, (_, value) in shared_settings(validated, settings).items()}
        )
    (first_path, _), first_shared = configs[0], shared[0]
    for (path, _), theirs in zip(configs[1:], shared[1:], strict=True):
        for key in sorted(set(first_shared) | set(theirs), key=str):
            if first_shared.get(key) != theirs.get(key):
                raise ConfigError(
                    f"{path.parent} and {first_path.parent} differ in {key}: "
                    f"{_value(theirs, key)} in {path}, {_value(first_shared, key)} in "
                    f"{first_path}; the models of one leaderboard are scored on the same "
                    "sentences with the same settings: run them with the same "
                    "--dataset-path, selection, --limit, --metrics and metric settings",
                    key,
                )
    whole = copy.deepcopy(configs[0][1])
    whole["output_dir"] = "."
    whole["models"] = [entry for _, config in configs for entry in config["models"]]
    # Where each run found its code of its own, should a model's translations be redone.
    whole["python_path"] = list(
        dict.fromkeys(folder for _, config in configs for folder in config.get("python_path", []))
    )
    for key in MODEL_KEYED:
        # Each model's own, from its run.
        own = {
            name: value
            for _, config in configs
            for name, value in (config.get(key) or {}).items()
            if name in {entry["name"] for entry in config["models"]}
        }
        whole.pop(key, None)
        if own:
            whole[key] = own
    return whole


def _value(shared: Mapping[str, Any], key: str) -> str:
    return json.dumps(shared[key], ensure_ascii=False) if key in shared else "(not set)"
