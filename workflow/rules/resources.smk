# What each job asks of the machine or the cluster: memory, time, CPUs, GPUs, Slurm settings
# and environment modules, from `resources` in the configuration.
from snakemake.exceptions import WorkflowError

from bouquet_eval.planning.job_cpus import default_cpus
from bouquet_eval.planning.sharding import fitting_shards


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


def job_settings(stage, model=None, family=None):
    """`resources.<stage>` of the configuration, with a model's own `resources` over it; CPUs
    by default from what the job runs (a translate job: its model's, in the plan; a score
    job: its `family` of metrics', all of them when None; see
    bouquet_eval.planning.job_cpus)."""
    settings = {
        "cpus": model.cpus if model else default_cpus(stage, METRIC_SET, family),
        **config["resources"][stage],
        **config["resources"].get(f"{stage}_{family}", {}),
    }
    own = model.resources if model else {}
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


def job_resources(stage, gpus, model=None, family=None):
    """Everything a job asks for; what the configuration leaves out comes from Snakemake's
    default-resources (a Slurm profile's partition and account, for instance)."""
    settings = job_settings(stage, model, family)
    return {
        "mem_mb": grows_with_attempt(settings["mem_mb"]),
        "runtime": grows_with_attempt(settings["runtime"]),
        **{key: settings[key] for key in SLURM_SETTINGS if key in settings},
        **gpu_request(settings, gpus),
    }


def job_envmodules(stage, model=None, family=None):
    """Environment modules a job loads first (used with --sdm env-modules)."""
    return job_settings(stage, model, family).get("envmodules", [])


def warn_of_unused_envmodules():
    """Without --sdm env-modules, jobs would run in Snakemake's own environment instead."""
    from snakemake.logging import logger
    from snakemake.settings.types import DeploymentMethod

    jobs = [("score", None), ("aggregate", None)]
    jobs += [("score", None, family) for family in METRIC_SET.families()]
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


def jobs_at_once(model):
    """How many of a model's jobs this run holds at once, from what each of them asks for
    (bouquet_eval.planning.sharding.fitting_shards): the shards of a model with `shards:
    auto`. None (as planned: 4 shards) where the run has no cores of its own to fit: on a
    cluster, in a cluster job, for a report."""
    cores = workflow.resource_settings.cores
    if cores is None or not workflow.local_exec or workflow.remote_exec:
        return None
    jobs = [
        (job_settings("score", family=family)["cpus"], score_gpus(family))
        for family in METRIC_SET.families()
    ]
    if model.name in PLAN.models and not model.translated_in_place:
        jobs.append((job_settings("translate", model)["cpus"], model.gpus))
    return fitting_shards(cores, workflow.global_resources.get("gpu").value, jobs)


# `shards: auto`: each model in as many jobs as the run's cores hold at once, so that none of
# its jobs waits for a core behind another of its own.
PLAN = PLAN.fitted(jobs_at_once)
MODELS = PLAN.models
