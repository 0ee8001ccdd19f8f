# The run's hooks: what the main process of a real run does when it starts, and when a job
# fails.
import os
import sys

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

from bouquet_eval.core.config import ConfigError
from bouquet_eval.core.io import write_json
from bouquet_eval.core.jobs import failed_job_report
from bouquet_eval.core.secrets import redact_command
from bouquet_eval.data.prefetch import check_hub_needs
from bouquet_eval.planning.checks import refuse_unset_api_keys, stop_planning
from bouquet_eval.planning.runs import (
    RunningError,
    command_line,
    refuse_beside_live_runs,
    register,
)
from bouquet_eval.planning.snakemake_patch import apply_to_run, unpatched_message


onerror:
    # The workflow's console (logger plugin `bouquet`) shows no job blocks: say which jobs
    # failed and where their logs are. Through Snakemake's logger, whose records a thread
    # writes in turn: printed directly, these lines could come before the last job's report.
    for line in failed_job_report(workflow.scheduler.failed):
        logger.error(line)


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
    if CHECKED_DATASET_FILES:
        write_json(DATASET_INDEX, CHECKED_DATASET_FILES[0])
    refuse_slurm_placeholders()
    refuse_unset_api_keys(PLAN.models.values(), jobs, workflow.configfiles)
    refuse_what_the_hub_cannot_give(jobs)
    # Snakemake's scheduler rounds and job records at the cost of what changed, not of what
    # waits for a core or of outputs times inputs (bouquet_eval.planning.snakemake_patch).
    unpatched = apply_to_run(workflow)
    if unpatched:
        logger.warning(unpatched_message(unpatched))


def refuse_what_the_hub_cannot_give(jobs):
    """Stop the run before any job starts when a model or tokenizer its jobs would load is
    neither in the Hugging Face cache nor to be had from the Hub (the same list `prefetch`
    fetches), naming it and how to fetch it: not in a job, after its model's retries."""
    translating = {
        job.params.model for job in jobs if job.rule.name.startswith("translate_")
    }
    scoring = any(job.rule.name.startswith(("score_", "verify_model")) for job in jobs)
    try:
        check_hub_needs(
            [*PLAN.hub_needs(translating), *(METRIC_SET.hub_needs() if scoring else ())]
        )
    except ConfigError as error:
        stop_planning(error, workflow.configfiles)


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
