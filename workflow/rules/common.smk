import json
import os
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from bouquet_eval.config import ConfigError, expand_path, validate_config
from bouquet_eval.data import resolve_dataset, select_directions
from bouquet_eval.provenance import (
    COMMAND_ENVIRONMENT_VARIABLE,
    redact_command,
    settings_digest,
)
from bouquet_eval.sharding import assign_shards
from bouquet_eval.translate import model_settings
from bouquet_eval.translators import model_gpus

# Lets configuration files name files of the repository (REPOSITORY, from sources.smk: the
# workflow's own, not workflow.basedir, which is the outermost Snakefile's) from anywhere.
os.environ.setdefault("BOUQUET_EVAL_HOME", str(REPOSITORY))
# Jobs run in other processes; they inherit the command line of the run for the manifest.
os.environ.setdefault(
    COMMAND_ENVIRONMENT_VARIABLE, json.dumps(redact_command(sys.argv))
)


# The embedded default: the bundled sample, unless a configuration file is given.
if not workflow.overwrite_configfiles:

    configfile: REPOSITORY / "config" / "demo.yaml"


try:
    validate_config(config, REPOSITORY / "workflow" / "schemas" / "config.schema.yaml")
    # Only the main process may contact the Hub; jobs read the cache it filled, so that all of
    # them see the commit it resolved the revision to.
    DATASET = resolve_dataset(config["dataset"], fetch=workflow.is_main_process)
    DIRECTIONS = select_directions(
        DATASET.directions(),
        src_langs=config["directions"]["src_langs"],
        tgt_langs=config["directions"]["tgt_langs"],
        names=config["directions"]["list"],
    )
except ConfigError as error:
    raise WorkflowError(f"bouquet-eval: {error}") from None

OUTPUT_DIR = expand_path(config["output_dir"])
MODELS = {model["name"]: model for model in config["models"]}


# Paths are plain strings below: Snakemake handles many thousands of them at this scale.
def model_dir(model):
    return f"{OUTPUT_DIR}/{model['name']}"


def rule_name(stage, model, shard):
    return f"{stage}_{re.sub(r'[^A-Za-z0-9]', '_', model['name'])}_{shard}"


def model_shards(model):
    return assign_shards(DIRECTIONS, model.get("shards", config["shards"]))


def translation_file(model, direction):
    return f"{model_dir(model)}/{direction}.jsonl"


def scored_file(model, direction):
    return f"{model_dir(model)}/{direction}.scored.parquet"


def all_translations():
    return [translation_file(m, d) for m in MODELS.values() for d in DIRECTIONS]


def all_scored():
    return [scored_file(m, d) for m in MODELS.values() for d in DIRECTIONS]


def all_aggregates():
    return [
        f"{model_dir(m)}/{name}"
        for m in MODELS.values()
        for name in (
            "scores.csv",
            "summary.csv",
            "timing.csv",
            "scored_rows.parquet",
            "manifest.json",
        )
    ]


def provided_translations(model, directions):
    """Translations brought by the user are inputs: a changed file is taken again."""
    if model["translator"] != "provided":
        return []
    folder = expand_path(model["path"])
    return [str(folder / f"{direction}.jsonl") for direction in directions]


# The conda environment of each family of jobs (envs/), for --sdm conda; relative to the rule
# files, as Snakemake reads conda paths, wherever the workflow's sources are.
TRANSLATOR_ENVIRONMENTS = {
    "openai": "api",
    "vllm": "vllm",
    "nllb": "hf",
    "madlad": "hf",
    "aya": "hf",
}


def translator_environment(model):
    name = TRANSLATOR_ENVIRONMENTS.get(model["translator"], "workflow")
    return f"../../envs/{name}.yaml"


def score_environment():
    neural = {"metricx", "glotlid"} & set(config["metrics"])
    return f"../../envs/{'metrics' if neural else 'workflow'}.yaml"


def grows_with_attempt(stage, key):
    """A resource that doubles on the second attempt, triples on the third, ..."""
    first = config["resources"][stage][key]

    def for_attempt(wildcards, attempt):
        return first * attempt

    return for_attempt


def score_gpus():
    uses_gpu = "metricx" in config["metrics"] and config["metricx"]["device"] != "cpu"
    return 1 if uses_gpu else 0


def metric_settings():
    """The settings of the selected metrics: a change makes their scores be recomputed."""
    return {name: config[name] for name in config["metrics"] if name in config}


def compared_models():
    return config["compare"]["models"] or list(MODELS)


def compare_baseline():
    return config["compare"]["baseline"] or compared_models()[0]


def scored_rows_of_compared_models():
    return [
        f"{model_dir(MODELS[name])}/scored_rows.parquet" for name in compared_models()
    ]


def scored_files_of_model(wildcards):
    return [scored_file(MODELS[wildcards.model], d) for d in DIRECTIONS]


def translation_digest(model):
    """Changes when anything that decides the model's translations changes."""
    return settings_digest(
        {
            "model": model_settings(model),
            "limit": config["limit"],
            "dataset": DATASET.identity,
        }
    )
