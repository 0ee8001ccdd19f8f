"""Rule script: score the directions of one shard (run by Snakemake)."""

from pathlib import Path

from bouquet_eval.data import resolve_dataset
from bouquet_eval.environment import job_environment, metric_models
from bouquet_eval.gpus import gpu_lease
from bouquet_eval.jobs import GPU_LEASES, SnakemakeJob, job_logging
from bouquet_eval.metrics import load_metrics
from bouquet_eval.outputs import direction_of, score_settings
from bouquet_eval.score import score_directions


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]), gpu_lease(snakemake.resources.gpu, GPU_LEASES):
        config = snakemake.config
        score_directions(
            [direction_of(path) for path in snakemake.output],
            Path(snakemake.output[0]).parent,
            load_metrics(snakemake.params.metrics, config),
            resolve_dataset(config["dataset"], fetch=False),
            score_settings(snakemake.params.metrics, config),
            config["limit"],
            {
                **job_environment(uses_gpu=snakemake.resources.gpu > 0),
                "models": metric_models(config),
            },
        )


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
