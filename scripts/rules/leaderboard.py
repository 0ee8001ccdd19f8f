"""Rule script: leaderboard.csv, leaderboard.md and the figures of the report."""

import json
from pathlib import Path

import pandas as pd

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.core.stats import Resampling
from bouquet_eval.metrics import load_metrics
from bouquet_eval.results.leaderboard import (
    build_leaderboard,
    lower_is_better_columns,
    read_results,
    report_decimals,
    score_columns,
    target_columns,
    write_leaderboard,
)
from bouquet_eval.results.report import RunRecords, figure_paths, write_figures
from bouquet_eval.results.trust import agreement_notes
from bouquet_eval.translators.backends import bounds, model_gpus


def read_timing(path: Path) -> pd.DataFrame:
    # An empty timing.csv (every translation taken from a cache) has no columns at all.
    return pd.read_csv(path) if path.stat().st_size > 1 else pd.DataFrame()


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        plan, settings = snakemake.params.plan, snakemake.params.settings
        models = snakemake.params.models
        entries = {entry["name"]: entry for entry in settings["models"]}
        metrics = load_metrics(settings["metrics"], settings)
        columns = score_columns(metrics)
        resampling = Resampling(**settings["statistics"])
        inputs = snakemake.input
        results = read_results(
            models,
            [
                (Path(scores), Path(rows), Path(resampled))
                for scores, rows, resampled in zip(
                    inputs.scores, inputs.scored_rows, inputs.resampled, strict=True
                )
            ],
            columns,
            resampling,
        )
        lower = lower_is_better_columns(metrics)
        board = build_leaderboard(
            results,
            columns,
            lower,
            resampling,
            bounds(entries.values()),
            target_columns(metrics),
        )
        board.attrs["decimals"] = report_decimals(metrics)
        for path in snakemake.input.agreement:
            board.attrs["agreement"] = agreement_notes(
                pd.read_csv(path), settings["metaeval"]["decide_by"]
            )
        write_leaderboard(board, Path(snakemake.output.csv), Path(snakemake.output.markdown), lower)
        log.info("%d models ranked by %s", len(board), board.attrs["primary"])

        folder = Path(snakemake.output.page).parent
        run = RunRecords(
            timing={
                m: read_timing(Path(p)) for m, p in zip(models, snakemake.input.timing, strict=True)
            },
            gpus={name: model_gpus(entries[name]) for name in models},
            # The run's page: what the leaderboard read of the configuration, and the dataset.
            config={**settings, "dataset": plan.dataset.identity},
            manifests={
                m: json.loads(Path(p).read_text(encoding="utf-8"))
                for m, p in zip(models, snakemake.input.manifests, strict=True)
            },
        )
        write_figures(
            figure_paths(folder, models, columns, [str(d) for d in plan.directions]),
            board,
            results,
            dict(zip(models, map(Path, snakemake.input.scored_rows), strict=True)),
            run,
            set(lower),
            resampling,
            settings["compare"]["baseline"],
            dict(zip(models, map(Path, snakemake.input.extracts), strict=True)),
        )
        log.info("report figures written to %s", folder)


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
