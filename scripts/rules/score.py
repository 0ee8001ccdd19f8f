"""Rule script: score the directions of one shard (run by Snakemake)."""

from pathlib import Path

from bouquet_eval.core.environment import job_environment, metric_models
from bouquet_eval.core.gpus import gpu_lease
from bouquet_eval.core.jobs import GPU_LEASES, SnakemakeJob, job_logging
from bouquet_eval.data.outputs import direction_of
from bouquet_eval.metrics import load_metrics
from bouquet_eval.scoring.score import score_directions


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]), gpu_lease(snakemake.resources.gpu, GPU_LEASES):
        plan = snakemake.params.plan
        folder = Path(snakemake.output[0]).parent
        dataset, limit = plan.scoring(folder)
        score_directions(
            [direction_of(path) for path in snakemake.output],
            folder,
            load_metrics(plan.metrics, plan.config),
            dataset,
            plan.score_settings,
            limit,
            {
                **job_environment(uses_gpu=snakemake.resources.gpu > 0),
                "models": metric_models(plan.config),
            },
        )


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
