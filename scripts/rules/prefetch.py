"""Rule script: fill the Hugging Face cache (run by Snakemake, on a machine with network)."""

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.data.prefetch import fetch_all, prefetch
from bouquet_eval.metrics.records import MetricSet


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        plan, settings = snakemake.params.plan, snakemake.params.settings
        metrics = MetricSet.of(settings["metrics"], settings)
        for line in prefetch(plan.dataset, [*plan.hub_needs(), *metrics.hub_needs()]):
            log.info("%s", line)
        for line in fetch_all(metrics.needs_once_fetched()):
            log.info("%s", line)
        if plan.judgements is not None:
            # Downloaded while Snakemake planned the run, as the dataset is (metaeval.judgements).
            files = ", ".join(str(path) for path in plan.judgements.files)
            log.info("metaeval judgements: %s (%s)", files, dict(plan.judgements.identity))


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
