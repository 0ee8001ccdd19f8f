import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

from bouquet_eval.planning.checks import (
    check_own_objects,
    refuse_unset_api_keys,
    stop_planning,
    warn_of_unset_api_keys,
)
from bouquet_eval.core.config import ConfigError, job_name
from bouquet_eval.core.freshness import check_job, describe, stamp_input, stamp_path
from bouquet_eval.planning.estimate import api_estimates
from bouquet_eval.core.io import write_json
from bouquet_eval.core.jobs import failed_job_report
from bouquet_eval.planning.job_cpus import default_cpus
from bouquet_eval.metrics import load_metrics
from bouquet_eval.data.outputs import AGGREGATES
from bouquet_eval.planning.plan import Sources, load_plan
from bouquet_eval.data.prefetch import check_hub_needs
from bouquet_eval.planning.runs import (
    command_line,
    RunningError,
    locked_by_a_live_run,
    refuse_beside_live_runs,
    register,
    remove_stale_locks,
)
from bouquet_eval.core.secrets import redact_command
from bouquet_eval.planning.selection import announce as announce_selection
from bouquet_eval.translators.backends import model_environment

# Parsing this file writes nothing and changes no environment variable. What the main process
# does once happens while Snakemake plans the run (`once_while_planning`: the jobs' PYTHONPATH,
# a killed run's locks, a dry run's warnings; the stamps that say whether existing outputs are
# current, see bouquet_eval.core.freshness) and when the run starts (`onstart`). docs/design.md says
# why.

# The embedded default: the bundled sample, unless a configuration file is given.
if not workflow.overwrite_configfiles:

    configfile: REPOSITORY / "config" / "demo.yaml"


# Checked files of the dataset, remembered between runs (see DatasetSource.check_files).
DATASET_INDEX = Path(".snakemake") / "bouquet-eval" / "dataset-files.json"

try:
    # Only the main process may contact the Hub; jobs read the cache it filled, so that all of
    # them see the commit it resolved the revision to.
    PLAN = load_plan(
        config,
        REPOSITORY / "workflow" / "schemas" / "config.schema.yaml",
        Sources(REPOSITORY, SOURCES_COMMIT),
        fetch=workflow.is_main_process,
    )
    CHECKED_DATASET_FILES = PLAN.dataset.check_files(PLAN.directions, DATASET_INDEX)
    # A metric of one's own that cannot be used stops the run here, before anything is written.
    METRICS = load_metrics(PLAN.metrics, config)
    # So are translators and prompt functions of one's own (imported, no model loaded), once.
    if workflow.is_main_process:
        check_own_objects(config["models"])
except ConfigError as error:
    stop_planning(error, workflow.configfiles)

OUTPUT_DIR = PLAN.output_dir
DATASET = PLAN.dataset
DIRECTIONS = PLAN.directions
MODELS = PLAN.models
if workflow.is_main_process:
    announce_selection(
        DATASET,
        DIRECTIONS,
        PLAN.selected,
        list(MODELS),
        config["directions"]["shard"],
        config["limit"],
    )
    for submission in PLAN.received.values():
        for notice in submission.notices():
            print(notice, file=sys.stderr)


onerror:
    # The workflow's console (logger plugin `bouquet`) shows no job blocks: say which jobs
    # failed and where their logs are.
    for line in failed_job_report(workflow.scheduler.failed):
        print(line, file=sys.stderr)


onsuccess:
    # Where the results are: the console's last line (bouquet_eval.command.console).
    logger.info(
        f"bouquet-eval: results in {OUTPUT_DIR}/ (leaderboard.csv, <model>/scores.csv); "
        "the report: snakemake --report report.html"
    )


onstart:
    # A run with --nolock (`snakemake progress --nolock`) is meant to go beside another one.
    jobs = list(workflow.dag.needrun_jobs())
    if workflow.execution_settings.lock:
        outputs = {path for job in jobs for path in job.output}
        try:
            refuse_beside_live_runs(outputs)
        except RunningError as error:
            raise WorkflowError(str(error)) from None
        # The command line as the manifests record it. Snakemake prints it (its banner, its
        # log under .snakemake/log/) only once the workflow is parsed, so never with a --config
        # item holding a secret: load_plan stops such a run (bouquet_eval.core.secrets).
        register(redact_command(command_line(), PLAN.secrets()), outputs)
    write_json(DATASET_INDEX, CHECKED_DATASET_FILES)
    refuse_slurm_placeholders()
    refuse_unset_api_keys(config["models"], jobs, workflow.configfiles)
    refuse_what_the_hub_cannot_give(jobs)


# Paths are plain strings below: Snakemake handles many thousands of them at this scale.
def model_dir(model):
    return str(model.folder)


def rule_name(stage, model, shard):
    return f"{stage}_{job_name(model.name)}_{shard}"


def model_shards(model):
    return model.shards


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


def check_provided(model):
    """Every selected direction has a file; files of directions the dataset lacks are named."""
    folder = model.provided
    if folder is None:
        return
    key = f"models[{list(MODELS).index(model.name)}].path"
    if not folder.is_dir():
        stop_planning(
            ConfigError(
                f"model '{model.name}' (translator: provided): folder '{folder}' not found",
                key,
            ),
            workflow.configfiles,
        )
    missing = [
        str(model.provided_file(d))
        for d in DIRECTIONS
        if not model.provided_file(d).is_file()
    ]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        stop_planning(
            ConfigError(
                f"model '{model.name}' (translator: provided, path: {folder}): no "
                f"translations for {len(missing)} selected direction(s): {shown}",
                key,
            ),
            workflow.configfiles,
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
    return [str(model.provided_file(d)) for d in directions if model.provided]


PLANNED = []
"""Whether the main process has done what it does once Snakemake plans the run."""


def once_while_planning(wildcards=None):
    """What the main process does once, from the first input function Snakemake evaluates (it
    adds no input). Planning is the only moment Snakemake leaves between parsing, when it does
    not yet know whether this is a dry run, and its check of the locks, which comes before any
    hook of the workflow (docs/design.md)."""
    if PLANNED or not workflow.is_main_process:
        return []
    PLANNED.append(True)
    give_jobs_the_package()
    if workflow.dryrun:
        warn_of_unset_api_keys(config["models"])
        # What the API models will send, and cost (bouquet_eval.planning.estimate).
        for estimate in api_estimates(config, DIRECTIONS, DATASET, OUTPUT_DIR):
            print(estimate.line(), file=sys.stderr)
    # Runs that execute jobs have execution settings (a report has none).
    elif workflow.execution_settings is not None and workflow.execution_settings.lock:
        # So that rerunning the command works after a crash (bouquet_eval.planning.runs).
        if remove_stale_locks():
            print(
                "bouquet-eval: removed the locks that a killed run left in .snakemake/locks",
                file=sys.stderr,
            )
        elif (held := locked_by_a_live_run()) is not None:
            print(held, file=sys.stderr)
    return []


CHECKED_STAMPS = set()
"""The stamps checked so far: Snakemake may ask for a job's inputs more than once."""


def planned_stamp(model, job, outputs):
    """An input function: the job's stamp, rewritten when one of its existing outputs is not
    current (bouquet_eval.core.freshness). It runs while Snakemake builds its plan, when it knows
    whether this is a dry run; a job's own process only names the stamp."""
    stamp = stamp_path(model.folder, job)

    def stamp_of_the_job(wildcards):
        once_while_planning()
        if workflow.is_main_process and stamp not in CHECKED_STAMPS:
            stale = check_job(stamp, outputs(), workflow.dryrun)
            if stale:
                print(f"bouquet-eval: {describe(stale)}", file=sys.stderr)
            CHECKED_STAMPS.add(stamp)
        return stamp_input(stamp)

    return stamp_of_the_job


def translation_stamp(model, shard, directions):
    return planned_stamp(
        model,
        f"translate-{shard}",
        lambda: PLAN.translation_outputs(model, directions),
    )


def score_stamp(model, shard, directions):
    return planned_stamp(
        model, f"score-{shard}", lambda: PLAN.scored_outputs(model, directions)
    )


def aggregate_stamp(wildcards):
    model = MODELS[wildcards.model]
    return planned_stamp(model, "aggregate", lambda: PLAN.aggregate_outputs(model))(
        wildcards
    )


def translator_environment(model):
    """The conda environment of the model's translate jobs (envs/), for --sdm conda; relative
    to the rule files, as Snakemake reads conda paths, wherever the workflow's sources are.
    """
    return f"../../envs/{model_environment(model.entry)}.yaml"


def score_environment():
    neural = {"metricx", "glotlid"} & set(PLAN.metrics)
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
    by default from what the job runs (bouquet_eval.planning.job_cpus)."""
    settings = {
        "cpus": default_cpus(stage, config, model.entry if model else None),
        **config["resources"][stage],
    }
    own = (model.entry if model else {}).get("resources") or {}
    if any(key in own for key in GPU_TYPE_SETTINGS):
        for key in GPU_TYPE_SETTINGS:
            settings.pop(key, None)
    settings.update(own)
    if all(key in settings for key in GPU_TYPE_SETTINGS):
        where = f"models[{model.name}].resources" if model else f"resources.{stage}"
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


def refuse_what_the_hub_cannot_give(jobs):
    """Stop the run before any job starts when a model or tokenizer its jobs would load is
    neither in the Hugging Face cache nor to be had from the Hub (the same list `prefetch`
    fetches), naming it and how to fetch it: not in a job, after its model's retries."""
    translating = {
        job.params.model for job in jobs if job.rule.name.startswith("translate_")
    }
    scoring = any(job.rule.name.startswith(("score_", "verify_model")) for job in jobs)
    try:
        check_hub_needs(config, translating, scoring)
    except ConfigError as error:
        stop_planning(error, workflow.configfiles)


def score_gpus():
    uses_gpu = "metricx" in PLAN.metrics and config["metricx"]["device"] != "cpu"
    return 1 if uses_gpu else 0


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


# Meta-evaluation (metaeval.smk): the judged systems' inputs and scored files.
def judged_inputs():
    return [
        path
        for model in PLAN.judged.values()
        for direction in DIRECTIONS_OF_JUDGED[model.name]
        for path in (
            translation_file(model, direction),
            f"{model_dir(model)}/dataset/{direction}.parquet",
        )
    ]


DIRECTIONS_OF_JUDGED = {
    model.name: sorted({d for part in model.shards.values() for d in part})
    for model in PLAN.judged.values()
}


def judged_scored(wildcards):
    if PLAN.judgements is None:
        raise WorkflowError(
            "bouquet-eval: the metaeval target needs human judgements: set "
            "metaeval.judgements (docs/metaeval.md)"
        )
    return [
        scored_file(model, direction)
        for model in PLAN.judged.values()
        for direction in DIRECTIONS_OF_JUDGED[model.name]
    ]


def judged_agreement():
    """correlations.csv when human judgements are configured (metaeval.smk), else nothing."""
    if PLAN.judgements is None:
        return []
    return [str(OUTPUT_DIR / "metaeval" / "correlations.csv")]
