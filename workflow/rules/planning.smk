# What the main process does once Snakemake plans the run, from input functions.
#
# Parsing comes before Snakemake knows whether the run is a dry run, and it checks its locks
# after planning and before any hook of the workflow (`onstart`): planning, that is the input
# functions Snakemake evaluates to build its plan, is the one moment in between. So the work
# that needs to know the kind of run, or must come before the lock check, is done by the
# first input function evaluated (`once_while_planning`, which adds no input; rules with no
# input function of their own name it as their input), and each job's stamp is checked by the
# job's own input function. docs/design.md lists what happens here.
import sys

from bouquet_eval.core.config import ConfigError
from bouquet_eval.core.freshness import check_job, describe, stamp_input, stamp_path
from bouquet_eval.data.dataset import prepare_dataset
from bouquet_eval.data.judgements import download_judgements
from bouquet_eval.planning.checks import (
    stop_planning,
    warn_of_unset_api_keys,
    warn_of_unusable_own_objects,
)
from bouquet_eval.planning.estimate import api_estimates
from bouquet_eval.planning.runs import locked_by_a_live_run, remove_stale_locks
from bouquet_eval.planning.selection import announce as announce_selection
from bouquet_eval.planning.snakemake_locks import UNSHARED_LOCKS, share_locks
from bouquet_eval.planning.snakemake_patch import unpatched_message

PLANNED = []
"""Whether the main process has done what it does once Snakemake plans the run."""
CHECKED_DATASET_FILES = []
"""The index of the dataset's files as checked while planning, written when the run starts."""


def once_while_planning(wildcards=None):
    """What the main process does once, from the first input function Snakemake evaluates (it
    adds no input). Planning is the only moment Snakemake leaves between parsing, when it does
    not yet know whether this is a dry run, and its check of the locks, which comes before any
    hook of the workflow (docs/design.md)."""
    if PLANNED or not workflow.is_main_process:
        return []
    PLANNED.append(True)
    give_jobs_the_package(PLAN.import_folders())
    try:
        # Every job reads the dataset's files: they are downloaded (a dataset on the Hub) or
        # laid out (one saved by `datasets`) and checked before any starts. Met-BOUQuET's
        # judgements, which the plan read from the Hub, are downloaded into the cache too.
        prepare_dataset(DATASET)
        download_judgements(PLAN.judgements)
        CHECKED_DATASET_FILES.append(DATASET.check_files(DIRECTIONS, DATASET_INDEX))
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
    except ConfigError as error:
        stop_planning(error, workflow.configfiles)
    if workflow.dryrun:
        warn_of_unset_api_keys(PLAN.models.values())
        warn_of_unusable_own_objects(PLAN.models.values(), workflow.configfiles)
        for problem in environment_problems(metric_environments(METRIC_SET.families())):
            print(
                f"bouquet-eval: warning: {problem}; a real run that scores with them stops "
                "before any job starts",
                file=sys.stderr,
            )
        # What the API models will send, and cost (bouquet_eval.planning.estimate).
        for estimate in api_estimates(PLAN):
            print(estimate.line(), file=sys.stderr)
    # Runs that execute jobs have execution settings (a report has none).
    elif workflow.execution_settings is not None and workflow.execution_settings.lock:
        # So that rerunning the command works after a crash (bouquet_eval.planning.runs).
        if remove_stale_locks():
            print(
                "bouquet-eval: removed the locks that a killed run left in .snakemake/locks",
                file=sys.stderr,
            )
        # Runs side by side (parts of a selection) that keep each other's locks; a refused
        # run names the run that holds them (bouquet_eval.planning.snakemake_locks).
        unpatched = share_locks(
            workflow.persistence, explain_refusal=locked_by_a_live_run
        )
        if unpatched:
            print(unpatched_message(unpatched, *UNSHARED_LOCKS), file=sys.stderr)
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


def metric_scores_stamp(model, family, shard, directions):
    def outputs():
        written = PLAN.metric_scores_outputs(model, family, directions)
        if METRIC_SET.gathered_in_score_jobs():
            written += PLAN.scored_outputs(model, directions)
        return written

    return planned_stamp(model, f"score-{family}-{shard}", outputs)


def score_stamp(model, shard, directions):
    return planned_stamp(
        model, f"score-{shard}", lambda: PLAN.scored_outputs(model, directions)
    )


def aggregate_stamp(wildcards):
    model = MODELS[wildcards.model]
    return planned_stamp(model, "aggregate", lambda: PLAN.aggregate_outputs(model))(
        wildcards
    )
