# The plan of the run and the paths of its files, derived from the configuration once while
# Snakemake parses the workflow. Parsing writes nothing and changes no environment variable:
# what the main process does once happens while Snakemake plans the run (planning.smk) and when
# the run starts (hooks.smk); docs/design.md says why.
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from bouquet_eval.core.config import ConfigError, expand_path, job_name
from bouquet_eval.data.outputs import AGGREGATES, metric_scores_path
from bouquet_eval.metrics import load_metrics
from bouquet_eval.metrics.records import MetricSet
from bouquet_eval.planning.channel import Unrecorded
from bouquet_eval.planning.checks import environment_problem, stop_planning
from bouquet_eval.planning.plan import Sources, load_plan
from bouquet_eval.results.extracts import EXTRACT_FILE
from bouquet_eval.results.leaderboard import primary_metric, score_columns
from bouquet_eval.results.paths import (
    figure_paths,
    heatmap_path,
    ranked_name,
    trust_page_path,
)
from bouquet_eval.results.verify import claim_fingerprint

# The embedded default: the bundled sample, unless a configuration file is given.
if not workflow.overwrite_configfiles:

    configfile: REPOSITORY / "config" / "demo.yaml"


# Checked files of the dataset, remembered between runs (see DatasetSource.check_files).
DATASET_INDEX = Path(".snakemake") / "bouquet-eval" / "dataset-files.json"

try:
    # Only the main process may ask the Hub (which files the dataset holds at its revision; it
    # downloads them once Snakemake plans the run); jobs read the cache it filled, so that all
    # of them see the commit it resolved the revision to.
    PLAN = load_plan(
        config,
        REPOSITORY / "workflow" / "schemas" / "config.schema.yaml",
        Sources(REPOSITORY, SOURCES_COMMIT),
        fetch=workflow.is_main_process,
    )
    # Code of one's own is found where `python_path` says, after the workflow's package.
    for folder in reversed(PLAN.import_folders()):
        if folder not in sys.path:
            sys.path.insert(1, folder)
    # A metric of one's own that cannot be used stops the run here, before anything is written.
    METRICS = load_metrics(PLAN.metrics, config)
    # What every job, prefetch and report needs to know of them, from their records.
    METRIC_SET = MetricSet.of(PLAN.metrics, config, METRICS)
    # Translators and prompt functions of one's own are imported only where a translate job
    # is to run (the run's start, hooks.smk; a dry run warns while planning, planning.smk).
except ConfigError as error:
    stop_planning(error, workflow.configfiles)

OUTPUT_DIR = PLAN.output_dir
DATASET = PLAN.dataset
DIRECTIONS = PLAN.directions
MODELS = PLAN.models


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


def metric_scores_file(model, metric, direction):
    return str(metric_scores_path(model.folder, metric, direction))


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


def model_files(name):
    """One file of every configured model's folder, in the order of `models`."""
    return [f"{model_dir(model)}/{name}" for model in MODELS.values()]


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


def translator_environment(model):
    """The conda environment of the model's translate jobs (envs/), for --sdm conda; relative
    to the rule files, as Snakemake reads conda paths, wherever the workflow's sources are.
    """
    return f"../../envs/{model.environment}.yaml"


def score_environment(family):
    """The conda environment of a family of metrics' score jobs (their records say)."""
    return f"../../envs/{METRIC_SET.family_environment(family)}.yaml"


def deploys_software():
    """Whether the run deploys its jobs' software itself (--sdm conda or env-modules)."""
    from snakemake.settings.types import DeploymentMethod

    deploying = {DeploymentMethod.CONDA, DeploymentMethod.ENV_MODULES}
    return bool(deploying & set(workflow.deployment_settings.deployment_method))


def environment_python(environment):
    """The Python of a software environment where `environments` names one, for a run that
    deploys no software itself (with --sdm conda or env-modules, those do)."""
    python = config["environments"].get(environment)
    if python is None or deploys_software():
        return None
    return str(expand_path(python))


def environment_problems(environments):
    """For each environment of `environments` (name -> the metrics that score in it), what
    keeps its score jobs from running (planning.checks.environment_problem), in a run that
    deploys no software itself."""
    if deploys_software():
        return []
    found = [
        environment_problem(
            name, environment_python(name), metrics, METRIC_SET.modules(metrics)
        )
        for name, metrics in environments.items()
    ]
    return [problem for problem in found if problem is not None]


def metric_environments(families):
    """The environments of score job families -> the metrics that score in them."""
    environments = {}
    for family in families:
        metrics = METRIC_SET.families()[family]
        environments.setdefault(METRIC_SET.family_environment(family), []).extend(
            metrics
        )
    return environments


def family_python(family):
    """The Python of a family of metrics' environment (see environment_python)."""
    return environment_python(METRIC_SET.family_environment(family))


def verify_environment():
    """Verification computes every metric in one job, in the environment that holds them
    all (MetricSet.joint_environment: COMET's when the COMET family is among them)."""
    return f"../../envs/{METRIC_SET.joint_environment()}.yaml"


def verify_python():
    """The Python of that environment where `environments` names one (see
    environment_python): the verify job hands its rescoring to it."""
    return environment_python(METRIC_SET.joint_environment())


def verify_envmodules():
    """The environment modules of a family of score jobs in that environment (with
    --sdm env-modules): `resources.score_<family>.envmodules`, over `resources.score`'s.
    """
    joint = METRIC_SET.joint_environment()
    family = next(
        f for f in METRIC_SET.families() if METRIC_SET.family_environment(f) == joint
    )
    return job_envmodules("score", family=family)


def score_gpus(family=None):
    """GPUs of a family of metrics' score jobs (their records say); of a job that computes
    every metric when `family` is None (verification)."""
    families = [family] if family else list(METRIC_SET.families())
    return max(METRIC_SET.family_gpus(name) for name in families)


def compared_models():
    return config["compare"]["models"] or list(MODELS)


def scored_rows_of_compared_models():
    return [
        f"{model_dir(MODELS[name])}/scored_rows.parquet" for name in compared_models()
    ]


def scored_files_of_model(wildcards):
    return [scored_file(MODELS[wildcards.model], d) for d in DIRECTIONS]


# The per-sentence score columns of the configured metrics (labels such as GlotLID's
# predicted language left out): one figure each.
SCORE_COLUMNS = score_columns(METRICS)
REPORT_DIR = OUTPUT_DIR / "report"
# The report lists a category's figures in order of their labels: numbered, the metric that
# ranks the leaderboard first.
METRIC_LABELS = {
    column: f"{number}. {column}"
    for number, column in enumerate(
        sorted(SCORE_COLUMNS, key=lambda c: c != primary_metric(SCORE_COLUMNS)), start=1
    )
}
FIGURES = figure_paths(
    REPORT_DIR, list(MODELS), SCORE_COLUMNS, [str(d) for d in DIRECTIONS]
)
LEADERBOARD = OUTPUT_DIR / "leaderboard.csv"


def ranked_model(wildcards):
    """The heatmaps' entry of a model in the report: best first (read when the report is made,
    after the leaderboard)."""
    return ranked_name(LEADERBOARD, wildcards.model)


def translations_of_model(wildcards):
    return [translation_file(MODELS[wildcards.model], d) for d in DIRECTIONS]


def submission_folder(name):
    return OUTPUT_DIR / "submission" / name


# What `verify` checks, by folder under OUTPUT_DIR: the received submissions when any are
# given, which are read as data only (each under its model's folder name), else the
# configured models' own runs.
RECEIVED = "received/"
CLAIMS = {name: None for name in MODELS} | {
    f"{RECEIVED}{folder}": submission for folder, submission in PLAN.received.items()
}
VERIFIED = [f"{RECEIVED}{folder}" for folder in PLAN.received] or list(MODELS)


def verified_name(folder):
    """The model's name of a folder of VERIFIED, as the configuration or submission gives it."""
    submission = CLAIMS[folder]
    return folder if submission is None else submission.name


def claim_digests(wildcards):
    """Digests of the claim a check reads, and of its translations, as they stand."""
    submission = CLAIMS[wildcards.model]
    if submission is not None:
        return submission.fingerprint()
    return claim_fingerprint(OUTPUT_DIR / wildcards.model)


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
