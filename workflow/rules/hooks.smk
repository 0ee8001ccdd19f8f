# The run's hooks: what the main process of a real run does when it starts, and when a job
# fails.
import os
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

import bouquet_eval.command.tracker as console_tracker
from bouquet_eval.core.config import ConfigError
from bouquet_eval.core.home import report_command
from bouquet_eval.core.io import write_json
from bouquet_eval.core.jobs import failed_job_report
from bouquet_eval.core.secrets import redact_command
from bouquet_eval.data.prefetch import check_hub_needs
from bouquet_eval.planning.checks import (
    check_own_objects,
    error_line,
    refuse_unset_api_keys,
    stop_planning,
    translating_models,
)
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
    line = closing_line({job.rule.name for job in workflow.dag.targetjobs})
    if line:
        logger.info(line, extra={console_tracker.CLOSING: True})


def closing_line(targets):
    """What a successful run made and where, by the targets it was asked for; with the
    command that writes the report, which works pasted in any folder. None for `progress`,
    whose table is the answer."""
    results = Path.cwd() / OUTPUT_DIR
    if "progress" in targets:
        return None
    made = {
        "submission": f"submissions in {results / 'submission'}/ (<model>.tar.gz)",
        "verify": f"every claim holds ({results}/<model>/verification.csv)",
        "metaeval": f"agreement with people in {results / 'metaeval'}/",
        "mtme": f"MT Metrics Eval's layout in {results / 'mtme'}/",
        "prefetch": f"fetched; what, at which commit: {Path.cwd() / 'logs' / 'prefetch.log'}",
    }
    lines = [made[target] for target in sorted(targets) if target in made]
    if lines:
        return "bouquet-eval: " + "; ".join(lines)
    if not (results / "leaderboard.md").is_file():
        return f"bouquet-eval: results in {results}/ (<model>/scores.csv)"
    command = report_command(
        workflow.main_snakefile, Path.cwd(), results / "report.html"
    )
    return (
        f"bouquet-eval: results in {results}/ (leaderboard.md, leaderboard.csv, "
        f"<model>/scores.csv); the report: {command}"
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
    if not workflow.touch:
        # What would make a job that is to start fail at once; `--touch` starts none.
        refuse_unusable_own_objects(jobs)
        refuse_environments_without_their_modules(jobs)
        refuse_unset_api_keys(PLAN.models.values(), jobs, workflow.configfiles)
        refuse_what_the_hub_cannot_give(jobs)
    # Snakemake's scheduler rounds and job records at the cost of what changed, not of what
    # waits for a core or of outputs times inputs (bouquet_eval.planning.snakemake_patch).
    unpatched = apply_to_run(workflow)
    if unpatched:
        logger.warning(unpatched_message(unpatched))
    # The console follows these jobs' outputs (bouquet_eval.command.tracker).
    logger.info(
        f"bouquet-eval: the console follows the outputs of the {len(jobs)} jobs to run",
        extra={console_tracker.PLANNED: console_tracker.planned_jobs(jobs)},
    )


def refuse_environments_without_their_modules(jobs):
    """Stop the run before any job starts when a family of metrics whose score jobs are to
    run cannot run in its software environment (COMET's with no `environments: {comet: ...}`
    in a Python without unbabel-comet, say), naming the setting to give."""
    rules = {job.rule.name for job in jobs}
    families = [
        f
        for f in METRIC_SET.families()
        if any(r.startswith(f"score_{f}_") for r in rules)
    ]
    environments = metric_environments(families)
    if "verify_model" in rules:
        environments.setdefault(METRIC_SET.joint_environment(), []).extend(PLAN.metrics)
    problems = environment_problems(environments)
    # Each environment's problem on a line of its own, so that one run names all there are.
    for problem in problems[:-1]:
        print(error_line(problem, workflow.configfiles), file=sys.stderr)
    if problems:
        last = problems[-1]
        stopped = f"{last}. No job was started."
        stop_planning(
            ConfigError(stopped, last.key, last.key_is_set), workflow.configfiles
        )


def refuse_unusable_own_objects(jobs):
    """Stop the run before any job starts when a translator or prompt function of one's own
    that a translate job is to call cannot be imported or called with its arguments; those
    of models that translate nothing in this run are not imported."""
    try:
        check_own_objects(PLAN.models.values(), translating_models(jobs))
    except ConfigError as error:
        stop_planning(error, workflow.configfiles)


def refuse_what_the_hub_cannot_give(jobs):
    """Stop the run before any job starts when a model or tokenizer its jobs would load is
    neither in the Hugging Face cache nor to be had from the Hub (the same list `prefetch`
    fetches), naming it and how to fetch it: not in a job, after its model's retries."""
    translating = translating_models(jobs)
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
