"""Rule script: the figures and pages of the Snakemake report."""

import json
from pathlib import Path

import pandas as pd

from bouquet_eval.jobs import job_logging
from bouquet_eval.leaderboard import (
    SENTENCE_KEY,
    lower_is_better_columns,
    read_leaderboard,
    score_columns,
)
from bouquet_eval.metrics import load_metrics
from bouquet_eval.provenance import redact
from bouquet_eval.report import (
    comparison,
    distributions,
    figure_paths,
    heatmap,
    language_bars,
    leaderboard_page,
    run_page,
    timing_figure,
    write_svg,
    write_text,
)

snakemake = globals()["snakemake"]

with job_logging(snakemake.log[0]) as log:
    models = snakemake.params.models
    metrics = load_metrics(snakemake.params.metrics, snakemake.config)
    columns = score_columns(metrics)
    lower = set(lower_is_better_columns(metrics))
    folder = Path(snakemake.output.leaderboard).parent
    paths = figure_paths(folder, models, columns)
    board = read_leaderboard(Path(snakemake.input.leaderboard))
    scores = {m: pd.read_csv(p) for m, p in zip(models, snakemake.input.scores, strict=True)}
    rows = {
        m: pd.read_parquet(p, columns=SENTENCE_KEY + [c for c in columns if c in scores[m]])
        for m, p in zip(models, snakemake.input.scored_rows, strict=True)
    }
    # Models in leaderboard order, best first, in every figure.
    ordered = [m for m in board["model"] if m in scores]

    write_text(paths["leaderboard"], leaderboard_page(board, lower))
    for (model, column), path in paths["heatmaps"].items():
        write_svg(path, heatmap(scores[model], column, model, lower))
    for (model, column), path in paths["languages"].items():
        write_svg(path, language_bars(scores[model], column, model, lower))
    for column, path in paths["distributions"].items():
        write_svg(path, distributions({m: rows[m] for m in ordered}, column, lower))
    write_svg(paths["comparison"], comparison(scores, board, lower))
    timing = {}
    for model, path in zip(models, snakemake.input.timing, strict=True):
        # An empty timing.csv (translations taken from the cache) has no columns at all.
        timing[model] = pd.read_csv(path) if Path(path).stat().st_size > 1 else pd.DataFrame()
    write_svg(
        paths["timing"],
        timing_figure({m: timing[m] for m in ordered}, snakemake.params.gpus),
    )
    manifests = {
        m: json.loads(Path(p).read_text(encoding="utf-8"))
        for m, p in zip(models, snakemake.input.manifests, strict=True)
    }
    write_text(paths["run"], run_page(redact(snakemake.config), manifests))
    log.info("report figures of %d models written to %s", len(models), folder)
