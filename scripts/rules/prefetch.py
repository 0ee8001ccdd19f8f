"""Rule script: fill the Hugging Face cache (run by Snakemake, on a machine with network)."""

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.data.prefetch import prefetch


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        plan = snakemake.params.plan
        for line in prefetch(plan.config, plan.dataset):
            log.info("%s", line)
        if plan.judgements is not None:
            # Fetched while the plan was made, as the dataset is (metaeval.judgements).
            files = ", ".join(str(path) for path in plan.judgements.files)
            log.info("metaeval judgements: %s (%s)", files, dict(plan.judgements.identity))


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
