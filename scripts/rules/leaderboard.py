"""Rule script: leaderboard.csv and leaderboard.md across the configured models."""

from pathlib import Path

from bouquet_eval.jobs import job_logging
from bouquet_eval.leaderboard import (
    build_leaderboard,
    lower_is_better_columns,
    read_results,
    score_columns,
    write_leaderboard,
)
from bouquet_eval.metrics import load_metrics
from bouquet_eval.stats import Resampling

snakemake = globals()["snakemake"]

with job_logging(snakemake.log[0]) as log:
    metrics = load_metrics(snakemake.params.metrics, snakemake.config)
    columns = score_columns(metrics)
    results = read_results(
        snakemake.params.models,
        [Path(path) for path in snakemake.input.scores],
        [Path(path) for path in snakemake.input.scored_rows],
        columns,
    )
    lower = lower_is_better_columns(metrics)
    board = build_leaderboard(results, columns, lower, Resampling(**snakemake.config["statistics"]))
    write_leaderboard(board, Path(snakemake.output.csv), Path(snakemake.output.markdown), lower)
    log.info("%d models ranked by %s", len(board), board.attrs["primary"])
