"""Rule script: a model's scores.csv, summary.csv, scored_rows.parquet and manifest entry."""

import json
import os
from pathlib import Path

from bouquet_eval.aggregate import (
    append_manifest,
    manifest_entry,
    recorded_environments,
    recorded_signatures,
    timing_table,
    timing_totals,
    write_aggregates,
    write_csv,
)
from bouquet_eval.cost import is_batch, model_price, with_costs
from bouquet_eval.data import Direction, resolve_dataset
from bouquet_eval.environment import WORKFLOW_COMMIT_VARIABLE
from bouquet_eval.jobs import SnakemakeJob, job_logging, model_entry
from bouquet_eval.metrics import load_metrics
from bouquet_eval.outputs import aggregate_outputs, translation_path
from bouquet_eval.provenance import known_secrets, redact
from bouquet_eval.stats import Resampling
from bouquet_eval.translate import model_settings


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        config = snakemake.config
        secrets = known_secrets(config)
        model_dir = Path(snakemake.output.scores).parent
        scored = [Path(path) for path in snakemake.input.scored]
        directions = [Direction.parse(name) for name in snakemake.params.directions]
        metrics = load_metrics(snakemake.params.metrics, config)
        resampling = Resampling(**config["statistics"])
        model = model_entry(config, snakemake.wildcards.model)
        timing = with_costs(
            timing_table(model_dir, directions), model_price(config, model), is_batch(model)
        )
        scores = write_aggregates(
            scored,
            metrics,
            resampling,
            {name: Path(snakemake.output[name]) for name in ("scores", "summary", "scored_rows")},
            timing,
        )
        write_csv(Path(snakemake.output.timing), timing)
        append_manifest(
            Path(snakemake.output.manifest),
            manifest_entry(
                config=redact(config, secrets),
                model_name=snakemake.wildcards.model,
                model_settings=redact(model_settings(model), secrets),
                dataset_identity=resolve_dataset(config["dataset"], fetch=False).identity,
                directions=directions,
                metric_signatures=recorded_signatures(scored),
                resampling=resampling,
                timing=timing_totals(timing),
                environments={
                    "translate": recorded_environments(
                        [translation_path(model_dir, d) for d in directions]
                    ),
                    "score": recorded_environments(scored),
                },
                workflow=json.loads(os.environ.get(WORKFLOW_COMMIT_VARIABLE, "null")),
            ),
        )
        for output in aggregate_outputs(model_dir, directions, config, secrets):
            output.record_written()
        log.info("%d directions aggregated into %s", len(scores), snakemake.output.scores)


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
