"""Rule script: a model's scores.csv, summary.csv, scored_rows.parquet, resampled.npz, report
extract and manifest entry."""

from collections.abc import Sequence
from pathlib import Path

from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.core.stats import Resampling
from bouquet_eval.data.outputs import translation_path
from bouquet_eval.metrics import load_metrics
from bouquet_eval.planning.cost import is_batch, model_price, with_costs
from bouquet_eval.planning.plan import model_settings
from bouquet_eval.planning.runs import recorded_command
from bouquet_eval.results.aggregate import (
    append_manifest,
    manifest_entry,
    recorded_environments,
    recorded_signatures,
    timing_table,
    timing_totals,
    write_aggregates,
    write_csv,
)
from bouquet_eval.results.extracts import ExtractBuilder
from bouquet_eval.results.leaderboard import lower_is_better_columns, score_columns

AGGREGATE_OUTPUTS = ("scores", "summary", "scored_rows", "resampled")


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        plan, settings = snakemake.params.plan, snakemake.params.settings
        model = plan.models[snakemake.wildcards.model]
        entry = settings["models"][0]
        scored = [Path(path) for path in snakemake.input.scored]
        directions = plan.directions
        metrics = load_metrics(settings["metrics"], settings)
        resampling = Resampling(**settings["statistics"])
        timing = with_costs(
            timing_table(model.folder, directions),
            model_price(settings, entry),
            is_batch(entry),
        )
        extracts: list[ExtractBuilder] = []

        def extract(rows: int, names: Sequence[str]) -> ExtractBuilder:
            builder = ExtractBuilder(
                rows, names, score_columns(metrics), lower_is_better_columns(metrics)
            )
            extracts.append(builder)
            return builder

        scores = write_aggregates(
            scored,
            metrics,
            resampling,
            {name: Path(snakemake.output[name]) for name in AGGREGATE_OUTPUTS},
            timing,
            extract,
        )
        extracts[0].extract().write(Path(snakemake.output.extract))
        write_csv(Path(snakemake.output.timing), timing)
        append_manifest(
            Path(snakemake.output.manifest),
            manifest_entry(
                settings=settings,
                model_name=model.name,
                model_settings=model_settings(entry),
                dataset_identity=plan.dataset.identity,
                directions=directions,
                metric_signatures=recorded_signatures(scored),
                resampling=resampling,
                timing=timing_totals(timing),
                environments={
                    "translate": recorded_environments(
                        [translation_path(model.folder, d) for d in directions]
                    ),
                    "score": recorded_environments(scored),
                },
                workflow=plan.sources.describe(),
                command=recorded_command(),
            ),
        )
        for output in plan.aggregate_outputs(model):
            output.record_written()
        log.info("%d directions aggregated into %s", len(scores), snakemake.output.scores)


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
