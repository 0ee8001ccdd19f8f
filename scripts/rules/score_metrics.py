"""Rule script: score one family of metrics on the directions of one shard (run by Snakemake)."""

from pathlib import Path

from bouquet_eval.core.gpus import gpu_lease
from bouquet_eval.core.jobs import GPU_LEASES, SnakemakeJob, job_logging
from bouquet_eval.data.outputs import SCORED_SUFFIX, direction_of, score_settings
from bouquet_eval.scoring.score import ScoreJob


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]), gpu_lease(snakemake.resources.gpu, GPU_LEASES):
        plan, settings = snakemake.params.plan, snakemake.params.settings
        folder = Path(snakemake.input.translations[0]).parent
        dataset, limit = plan.scoring(folder, settings["limit"])
        job = ScoreJob(
            list(dict.fromkeys(direction_of(path) for path in snakemake.output)),
            folder,
            list(snakemake.params.metrics),
            dict(settings),
            dataset,
            limit,
            uses_gpu=snakemake.resources.gpu > 0,
            # Its outputs say whether it writes the scored files too (its metrics are all of
            # the run's: MetricSet.gathered_in_score_jobs).
            scored_settings=(
                score_settings(settings["metrics"], settings)
                if any(path.endswith(SCORED_SUFFIX) for path in snakemake.output)
                else None
            ),
        )
        # The Python of the metrics' own environment, when the configuration names one.
        python = snakemake.params.python.value
        if python:
            job.run_in(python, Path(snakemake.log[0]))
        else:
            job.run()


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
