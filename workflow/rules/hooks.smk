# The run's hooks: what the main process of a real run does when it starts, and when a job
# fails.
import os
import sys

from snakemake.exceptions import WorkflowError

from bouquet_eval.core.io import write_json
from bouquet_eval.core.jobs import failed_job_report
from bouquet_eval.core.secrets import redact_command
from bouquet_eval.planning.checks import refuse_unset_api_keys
from bouquet_eval.planning.runs import (
    RunningError,
    command_line,
    refuse_beside_live_runs,
    register,
)


onerror:
    # Snakemake's error block of each job is hidden with the rest of its job blocks (the
    # workflow profile's quiet): say which jobs failed and where their logs are.
    for line in failed_job_report(workflow.scheduler.failed):
        print(line, file=sys.stderr)


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
    refuse_unset_api_keys(config["models"], jobs, workflow.configfiles)


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
