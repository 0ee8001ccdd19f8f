"""Rule script: one model's submission folder and archive."""

from pathlib import Path

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.data.dataset import Direction
from bouquet_eval.results.submission import write_submission


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        note = write_submission(
            snakemake.wildcards.model,
            Path(snakemake.input.scores).parent,
            [Direction.parse(name) for name in snakemake.params.directions],
            Path(snakemake.output.checksums).parent,
            Path(snakemake.output.archive),
            snakemake.params.headline,
            snakemake.params.lower_is_better,
            snakemake.params.dataset_directions,
        )
        log.info("submission written to %s", snakemake.output.archive)
        log.info("%s", note.rstrip())


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
