"""Rule script: paired significance tests between models (run by Snakemake)."""

from pathlib import Path

import pandas as pd

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.metrics import load_metrics, metric_columns
from bouquet_eval.results.aggregate import write_csv
from bouquet_eval.results.compare import compare_models


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        plan = snakemake.params.plan
        rows = {
            name: pd.read_parquet(path)
            for name, path in zip(snakemake.params.models, snakemake.input, strict=True)
        }
        comparison = compare_models(
            rows,
            snakemake.params.baseline,
            metric_columns(load_metrics(plan.metrics, plan.config)),
            plan.resampling,
        )
        write_csv(Path(snakemake.output[0]), comparison)
        log.info("%d comparisons written to %s", len(comparison), snakemake.output[0])


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
