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

REPOSITORY = Path(workflow.basedir).parent
# Lets configuration files name files of the repository from any working directory.
os.environ.setdefault("BOUQUET_EVAL_HOME", str(REPOSITORY))
# Jobs run in other processes; they inherit the command line of the run for the manifest.
os.environ.setdefault(
    COMMAND_ENVIRONMENT_VARIABLE, json.dumps(redact_command(sys.argv))
)


# The embedded default: the bundled sample, unless a configuration file is given.
if not workflow.overwrite_configfiles:

    configfile: REPOSITORY / "config" / "demo.yaml"


try:
    validate_config(config, Path(workflow.basedir) / "schemas" / "config.schema.yaml")
    DATASET = resolve_dataset(config["dataset"])
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


# The conda environment of each family of jobs (envs/), for --sdm conda.
TRANSLATOR_ENVIRONMENTS = {
    "openai": "api",
    "vllm": "vllm",
    "nllb": "hf",
    "madlad": "hf",
    "aya": "hf",
}


def translator_environment(model):
    name = TRANSLATOR_ENVIRONMENTS.get(model["translator"], "workflow")
    return str(REPOSITORY / "envs" / f"{name}.yaml")


def score_environment():
    neural = {"metricx", "glotlid"} & set(config["metrics"])
    return str(REPOSITORY / "envs" / ("metrics.yaml" if neural else "workflow.yaml"))


def grows_with_attempt(first):
    """A resource that doubles on the second attempt, triples on the third, ..."""

    def for_attempt(wildcards, attempt):
        return first * attempt

    return for_attempt


# Job settings that go to Slurm as they are, under the Slurm executor's resource names.
SLURM_SETTINGS = (
    "slurm_partition",
    "slurm_account",
    "qos",
    "constraint",
    "slurm_extra",
)
# Two ways to name the GPU type: --gpus=<gpu_model>:N, or --gres=<gres>:N.
GPU_TYPE_SETTINGS = ("gpu_model", "gres")


def job_settings(stage, model=None):
    """`resources.<stage>` of the configuration, with a model's own `resources` over it."""
    settings = dict(config["resources"][stage])
    own = (model or {}).get("resources") or {}
    if any(key in own for key in GPU_TYPE_SETTINGS):
        for key in GPU_TYPE_SETTINGS:
            settings.pop(key, None)
    settings.update(own)
    if all(key in settings for key in GPU_TYPE_SETTINGS):
        where = f"models[{model['name']}].resources" if model else f"resources.{stage}"
        raise WorkflowError(
            f"bouquet-eval: {where} sets both gres and gpu_model: keep one"
        )
    return settings


def gpu_request(settings, gpus):
    """A job's GPUs as Snakemake counts them (`gpu`) and as Slurm is asked for them."""
    if gpus and "gres" in settings:
        # Slurm refuses --gres and --gpus in one request, so the count goes into the gres;
        # Snakemake then counts no GPU for the job (a Slurm allocation is its own anyway).
        return {"gpu": 0, "gres": f"{settings['gres']}:{gpus}"}
    if gpus and "gpu_model" in settings:
        return {"gpu": gpus, "gpu_model": settings["gpu_model"]}
    return {"gpu": gpus}


def job_resources(stage, gpus, model=None):
    """Everything a job asks for; what the configuration leaves out comes from Snakemake's
    default-resources (a Slurm profile's partition and account, for instance)."""
    settings = job_settings(stage, model)
    return {
        "mem_mb": grows_with_attempt(settings["mem_mb"]),
        "runtime": grows_with_attempt(settings["runtime"]),
        **{key: settings[key] for key in SLURM_SETTINGS if key in settings},
        **gpu_request(settings, gpus),
    }


def job_envmodules(stage, model=None):
    """Environment modules a job loads first (used with --sdm env-modules)."""
    return job_settings(stage, model).get("envmodules", [])


def warn_of_unused_envmodules():
    """Without --sdm env-modules, jobs would run in Snakemake's own environment instead."""
    from snakemake.logging import logger
    from snakemake.settings.types import DeploymentMethod

    jobs = [("score", None), ("aggregate", None)]
    jobs += [("translate", model) for model in MODELS.values()]
    modules = sorted({name for job in jobs for name in job_envmodules(*job)})
    methods = workflow.deployment_settings.deployment_method
    if (
        modules
        and DeploymentMethod.ENV_MODULES not in methods
        and workflow.is_main_process
    ):
        logger.warning(
            f"bouquet-eval: jobs are to load environment modules ({', '.join(modules)}), "
            "which happens only with --sdm env-modules: without it, they run in "
            "Snakemake's own environment."
        )


warn_of_unused_envmodules()


# The value profiles/slurm ships for the account and the partition.
PLACEHOLDER_PREFIX = "REPLACE-WITH-"


def profile_files_naming(value):
    """The files of this run's profiles (--profile, $SNAKEMAKE_PROFILE) that hold `value`."""
    from snakemake.cli import get_argument_parser, get_profile_dir

    arguments, _ = get_argument_parser().parse_known_args(sys.argv[1:])
    found = []
    for name in arguments.profile or []:
        # A relative path is relative to where snakemake started (the shell's PWD), not to
        # --directory, which is the working directory by now.
        path = os.path.join(os.environ.get("PWD", ""), name)
        entry = get_profile_dir(path if os.path.exists(path) else name)
        if entry and value in entry[1].read_text():
            found.append(str(entry[1]))
    return found


def refuse_slurm_placeholders():
    """Stop a Slurm run before it submits anything while an account or a partition is still
    the profile's placeholder."""
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name != "slurm":
        return
    for job in workflow.dag.needrun_jobs():
        for key in ("slurm_account", "slurm_partition"):
            value = job.resources.get(key)
            if job.is_local or not str(value).startswith(PLACEHOLDER_PREFIX):
                continue
            where = " or ".join(profile_files_naming(value)) or "your Slurm profile"
            raise WorkflowError(
                f"bouquet-eval: {key} is still the placeholder '{value}' (job "
                f"{job.rule.name}): set {key} under default-resources in {where}, or delete "
                f"that line if your site has none (or give it per job family in the "
                f"configuration: resources.<translate|score|aggregate>.{key}). Nothing was "
                f"submitted."
            )


onstart:
    refuse_slurm_placeholders()


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
