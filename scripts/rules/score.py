"""Rule script: gather the metrics' columns of one shard's directions into their scored files."""

from pathlib import Path

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.data.outputs import direction_of, score_settings
from bouquet_eval.scoring.score import gather_scores


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]):
        plan, settings = snakemake.params.plan, snakemake.params.settings
        folder = Path(snakemake.output[0]).parent
        dataset, limit = plan.scoring(folder, settings["limit"])
        gather_scores(
            [direction_of(path) for path in snakemake.output],
            folder,
            dataset,
            score_settings(settings["metrics"], settings),
            limit,
        )


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
