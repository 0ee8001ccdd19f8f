"""Rule script: translate the directions of one shard (run by Snakemake)."""

from bouquet_eval.core.gpus import gpu_lease
from bouquet_eval.core.jobs import GPU_LEASES, SnakemakeJob, job_logging
from bouquet_eval.data.outputs import direction_of
from bouquet_eval.translation.translate import translate_planned


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]), gpu_lease(snakemake.resources.gpu, GPU_LEASES):
        plan = snakemake.params.plan
        translate_planned(
            plan.models[snakemake.params.model],
            snakemake.params.settings,
            [direction_of(path) for path in snakemake.output],
            plan.dataset,
            plan.stall_timeout,
        )


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
