import json
import os
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from bouquet_eval.config import (
    ConfigError,
    expand_path,
    job_name,
    literal_secrets,
    validate_config,
)
from bouquet_eval.data import resolve_dataset, select_directions
from bouquet_eval.environment import WORKFLOW_COMMIT_VARIABLE, workflow_commit
from bouquet_eval.job_cpus import default_cpus
from bouquet_eval.metrics import load_metrics
from bouquet_eval.outputs import (
    AGGREGATES,
    aggregate_outputs,
    scored_output,
    score_settings,
    translation_output,
)
from bouquet_eval.planning import (
    check_job,
    describe,
    is_dry_run,
    stamp_input,
    stamp_path,
)
from bouquet_eval.runs import register as register_run
from bouquet_eval.runs import remove_stale_locks
from bouquet_eval.provenance import (
    COMMAND_ENVIRONMENT_VARIABLE,
    known_secrets,
    redact_command,
    settings_digest,
)
from bouquet_eval.sharding import assign_shards
from bouquet_eval.translate import provided_folder, translation_settings
from bouquet_eval.translators.backends import model_environment, model_gpus

# Lets configuration files name files of the repository (REPOSITORY, from sources.smk: the
# workflow's own, not workflow.basedir, which is the outermost Snakefile's) from anywhere.
os.environ.setdefault("BOUQUET_EVAL_HOME", str(REPOSITORY))
if workflow.is_main_process:
    # The workflow's own commit, for the manifest (written by jobs in other processes).
    os.environ[WORKFLOW_COMMIT_VARIABLE] = json.dumps(
        {"commit": SOURCES_COMMIT, "modified": False}
        if SOURCES_COMMIT
        else workflow_commit(REPOSITORY)
    )
    # "Rerun the same command" after a crash: a killed run's locks are removed.
    if remove_stale_locks():
        print(
            "bouquet-eval: removed the locks that a killed run left in .snakemake/locks",
            file=sys.stderr,
        )
    register_run()


# The embedded default: the bundled sample, unless a configuration file is given.
if not workflow.overwrite_configfiles:

    configfile: REPOSITORY / "config" / "demo.yaml"


def file_in_the_way(folder):
    """The file that stands where `folder`, or a folder above it, is to be; None if none does
    (Snakemake would otherwise fail creating it, with a traceback naming no setting)."""
    for path in (folder, *folder.parents):
        if path.exists():
            return None if path.is_dir() else path
    return None


def refuse_files_as_folders(output_dir, models):
    """Stop with one line when output_dir, or a model's folder in it, cannot be a folder."""
    folders = {"output_dir": output_dir}
    for model in models:
        folders[f"model '{model['name']}': folder"] = output_dir / model["name"]
    for what, folder in folders.items():
        blocking = file_in_the_way(folder)
        if blocking is not None:
            within = "" if blocking == folder else f": '{blocking}'"
            raise ConfigError(f"{what} '{folder}'{within} is a file, not a folder")


try:
    validate_config(config, REPOSITORY / "workflow" / "schemas" / "config.schema.yaml")
    OUTPUT_DIR = expand_path(config["output_dir"])
    refuse_files_as_folders(OUTPUT_DIR, config["models"])
    # Only the main process may contact the Hub; jobs read the cache it filled, so that all of
    # them see the commit it resolved the revision to.
    DATASET = resolve_dataset(config["dataset"], fetch=workflow.is_main_process)
    DIRECTIONS = select_directions(
        DATASET.directions(),
        src_filter=config["directions"]["src_langs"],
        tgt_filter=config["directions"]["tgt_langs"],
        directions=config["directions"]["list"],
    )
    DATASET.check_files(
        DIRECTIONS, Path(".snakemake") / "bouquet-eval" / "dataset-files.json"
    )
    # A metric of one's own that cannot be used stops the run here, before anything is written.
    METRICS = load_metrics(config["metrics"], config)
except ConfigError as error:
    raise WorkflowError(f"bouquet-eval: {error}") from None

SECRETS = known_secrets(config)
# Jobs run in other processes; they inherit the command line of the run for the manifest.
COMMAND = redact_command(sys.argv, SECRETS)
os.environ.setdefault(COMMAND_ENVIRONMENT_VARIABLE, json.dumps(COMMAND))
if workflow.is_main_process:
    # Snakemake's banner and its log under .snakemake/log/ print sys.argv once the plan is
    # made; it has been parsed by now, and jobs are started from the parsed settings.
    sys.argv[:] = COMMAND
    for location in literal_secrets(config):
        print(
            f"bouquet-eval: warning: the configuration holds a literal value at '{location}'. "
            "Snakemake copies the configuration into the job scripts it writes under "
            ".snakemake/scripts/, which a killed run leaves behind: keep secrets in environment "
            "variables and name them in a setting ending in _env (see config/README.md).",
            file=sys.stderr,
        )

MODELS = {model["name"]: model for model in config["models"]}
DRY_RUN = is_dry_run(sys.argv)
STALE_OUTPUTS = []
"""Existing outputs found not current while planning (reported once the rules are built)."""


# Paths are plain strings below: Snakemake handles many thousands of them at this scale.
def model_dir(model):
    return f"{OUTPUT_DIR}/{model['name']}"


def rule_name(stage, model, shard):
    return f"{stage}_{job_name(model['name'])}_{shard}"


def model_shards(model):
    return assign_shards(DIRECTIONS, model.get("shards", config["shards"]))


def translation_file(model, direction):
    return f"{model_dir(model)}/{direction}.jsonl"


def scored_file(model, direction):
    return f"{model_dir(model)}/{direction}.scored.parquet"


def dataset_files(directions):
    return [str(DATASET.file(direction)) for direction in directions]


def all_translations():
    return [translation_file(m, d) for m in MODELS.values() for d in DIRECTIONS]


def all_scored():
    return [scored_file(m, d) for m in MODELS.values() for d in DIRECTIONS]


def all_aggregates():
    return [
        f"{model_dir(m)}/{name}"
        for m in MODELS.values()
        for name in (*AGGREGATES, "manifest.json")
    ]


def translated_in_place(model):
    """Translations brought by the user that already sit in the model's output folder: they
    are scored where they are, and no job writes them."""
    folder = provided_folder(model)
    return folder is not None and folder.resolve() == Path(model_dir(model)).resolve()


def check_provided(model):
    """Every selected direction has a file; files of directions the dataset lacks are named."""
    folder = provided_folder(model)
    if folder is None:
        return
    if not folder.is_dir():
        raise WorkflowError(
            f"bouquet-eval: model '{model['name']}' (translator: provided): folder '{folder}' "
            "not found"
        )
    missing = [
        str(folder / f"{d}.jsonl")
        for d in DIRECTIONS
        if not (folder / f"{d}.jsonl").is_file()
    ]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise WorkflowError(
            f"bouquet-eval: model '{model['name']}' (translator: provided, path: {folder}): "
            f"no translations for {len(missing)} selected direction(s): {shown}"
        )
    known = {direction.name for direction in DATASET.directions()}
    for path in sorted(folder.glob("*.jsonl")):
        if workflow.is_main_process and path.name.removesuffix(".jsonl") not in known:
            print(
                f"bouquet-eval: warning: {path} is not a direction of the dataset; it is ignored",
                file=sys.stderr,
            )


for model in MODELS.values():
    check_provided(model)


def provided_translations(model, directions):
    """Translations brought by the user are inputs: a changed file is taken again."""
    folder = provided_folder(model)
    if folder is None:
        return []
    return [str(folder / f"{direction}.jsonl") for direction in directions]


def planned_stamp(model, job, outputs):
    """The job's stamp input, rewritten when one of its existing outputs is not current."""
    stamp = stamp_path(Path(model_dir(model)), job)
    if workflow.is_main_process:
        STALE_OUTPUTS.extend(check_job(stamp, outputs, DRY_RUN))
    return stamp_input(stamp)


def translation_stamp(model, shard, directions):
    folder = provided_folder(model)
    settings = translation_settings(model, config["limit"])
    outputs = [
        translation_output(
            Path(model_dir(model)),
            direction,
            settings,
            DATASET.file(direction),
            None if folder is None else folder / f"{direction}.jsonl",
            SECRETS,
        )
        for direction in directions
    ]
    return planned_stamp(model, f"translate-{shard}", outputs)


def score_stamp(model, shard, directions):
    settings = score_settings(config["metrics"], config)
    outputs = [
        scored_output(Path(model_dir(model)), d, settings, DATASET.file(d), SECRETS)
        for d in directions
    ]
    return planned_stamp(model, f"score-{shard}", outputs)


def aggregate_stamp(wildcards):
    """Evaluated while Snakemake builds its plan, after the other stamps were reported."""
    model = MODELS[wildcards.model]
    stale_before = len(STALE_OUTPUTS)
    outputs = aggregate_outputs(Path(model_dir(model)), DIRECTIONS, config, SECRETS)
    stamp = planned_stamp(model, "aggregate", outputs)
    if len(STALE_OUTPUTS) > stale_before:
        print(
            f"bouquet-eval: {describe(STALE_OUTPUTS[stale_before:])}", file=sys.stderr
        )
    return stamp


def translator_environment(model):
    """The conda environment of the model's translate jobs (envs/), for --sdm conda; relative
    to the rule files, as Snakemake reads conda paths, wherever the workflow's sources are.
    """
    return f"../../envs/{model_environment(model)}.yaml"


def score_environment():
    neural = {"metricx", "glotlid"} & set(config["metrics"])
    return f"../../envs/{'metrics' if neural else 'workflow'}.yaml"


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
    """`resources.<stage>` of the configuration, with a model's own `resources` over it; CPUs
    by default from what the job runs (bouquet_eval.job_cpus)."""
    settings = {
        "cpus": default_cpus(stage, config, model),
        **config["resources"][stage],
    }
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
    """What decides the scores (the planner's own, outputs.score_settings): a change also
    shows in Snakemake's plan, as changed params."""
    return score_settings(config["metrics"], config)


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
    return settings_digest(translation_settings(model, config["limit"]), SECRETS)


def report_stale_outputs():
    if STALE_OUTPUTS:
        print(f"bouquet-eval: {describe(STALE_OUTPUTS)}", file=sys.stderr)
