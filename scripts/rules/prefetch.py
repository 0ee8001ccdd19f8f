"""Rule script: fill the Hugging Face cache (run by Snakemake, on a machine with network)."""

from bouquet_eval.jobs import job_logging
from bouquet_eval.prefetch import prefetch

snakemake = globals()["snakemake"]

with job_logging(snakemake.log[0]) as log:
    plan = snakemake.params.plan
    for line in prefetch(plan.config, plan.dataset):
        log.info("%s", line)
