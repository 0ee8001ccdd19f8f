"""Rule script: paired significance tests between models (run by Snakemake)."""

from pathlib import Path

import pandas as pd

from bouquet_eval.core.jobs import JobFailure, SnakemakeJob, job_logging
from bouquet_eval.core.stats import Resampling
from bouquet_eval.metrics import load_metrics, metric_columns
from bouquet_eval.results.aggregate import write_csv
from bouquet_eval.results.compare import compare_models


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        settings, models = snakemake.params.settings, snakemake.params.models
        if not models:  # a maintainer's configuration, which only verifies submissions
            raise JobFailure("no model to compare: the configuration lists none (models)")
        rows = {
            name: pd.read_parquet(path) for name, path in zip(models, snakemake.input, strict=True)
        }
        comparison = compare_models(
            rows,
            settings["compare"]["baseline"] or models[0],
            metric_columns(load_metrics(settings["metrics"], settings)),
            Resampling(**settings["statistics"]),
        )
        write_csv(Path(snakemake.output[0]), comparison)
        log.info("%d comparisons written to %s", len(comparison), snakemake.output[0])


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
