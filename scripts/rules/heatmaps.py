"""Rule script: one model's heatmaps, from its scores.csv."""

from pathlib import Path

import pandas as pd

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.metrics import load_metrics
from bouquet_eval.results.figures import write_heatmaps
from bouquet_eval.results.leaderboard import lower_is_better_columns, target_columns


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        model = snakemake.wildcards.model
        settings = snakemake.params.settings
        metrics = load_metrics(settings["metrics"], settings)
        lower = lower_is_better_columns(metrics)
        columns = snakemake.params.columns
        paths = dict(zip(columns, map(Path, snakemake.output.heatmaps), strict=True))
        scores = pd.read_csv(snakemake.input.scores)
        write_heatmaps(paths, scores, model, set(lower), target_columns(metrics))
        log.info("%d heatmaps of %s written", len(paths), model)


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
