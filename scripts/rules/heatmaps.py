"""Rule script: one model's heatmaps, from its scores.csv."""

from pathlib import Path

import pandas as pd

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.metrics import load_metrics
from bouquet_eval.results.leaderboard import lower_is_better_columns
from bouquet_eval.results.report import write_heatmaps


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        model = snakemake.wildcards.model
        settings = snakemake.params.settings
        lower = lower_is_better_columns(load_metrics(settings["metrics"], settings))
        columns = snakemake.params.columns
        paths = dict(zip(columns, map(Path, snakemake.output.heatmaps), strict=True))
        write_heatmaps(paths, pd.read_csv(snakemake.input.scores), model, set(lower))
        log.info("%d heatmaps of %s written", len(paths), model)


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
