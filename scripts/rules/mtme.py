"""Rule script: every direction in MT Metrics Eval's layout."""

from pathlib import Path

import pandas as pd

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.data.dataset import Direction
from bouquet_eval.metrics import load_metrics
from bouquet_eval.results.leaderboard import score_columns
from bouquet_eval.results.mtme import export, needed_columns


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        plan, settings = snakemake.params.plan, snakemake.params.settings
        models = snakemake.params.models
        metrics = load_metrics(settings["metrics"], settings)
        columns = score_columns(metrics)
        scores = {m: pd.read_csv(p) for m, p in zip(models, snakemake.input.scores, strict=True)}
        rows = {}
        for model, path in zip(models, snakemake.input.scored_rows, strict=True):
            available = needed_columns([c for c in columns if c in scores[model]])
            rows[model] = pd.read_parquet(path, columns=available)
        directions = [Direction.parse(name) for name in snakemake.params.directions]
        export(
            Path(snakemake.output[0]),
            directions,
            plan.dataset,
            settings["limit"],
            rows,
            scores,
            columns,
            metrics,
        )
        log.info(
            "%d directions of %d models exported to %s",
            len(directions),
            len(models),
            snakemake.output[0],
        )


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
