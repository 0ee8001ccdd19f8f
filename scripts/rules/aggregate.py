"""Rule script: a model's scores.csv, summary.csv, scored_rows.parquet and manifest entry."""

from pathlib import Path

from bouquet_eval.aggregate import (
    append_manifest,
    manifest_entry,
    recorded_signatures,
    timing_table,
    timing_totals,
    write_aggregates,
    write_csv,
)
from bouquet_eval.data import Direction, resolve_dataset
from bouquet_eval.jobs import job_logging, model_entry
from bouquet_eval.metrics import load_metrics, metric_columns
from bouquet_eval.provenance import redact
from bouquet_eval.stats import Resampling
from bouquet_eval.translate import model_settings

snakemake = globals()["snakemake"]

with job_logging(snakemake.log[0]) as log:
    config = snakemake.config
    metrics = load_metrics(snakemake.params.metrics, config)
    resampling = Resampling(**config["statistics"])
    scores = write_aggregates(
        [Path(path) for path in snakemake.input],
        metric_columns(metrics),
        resampling,
        {name: Path(snakemake.output[name]) for name in ("scores", "summary", "scored_rows")},
    )
    directions = [Direction.parse(name) for name in snakemake.params.directions]
    timing = timing_table(Path(snakemake.output.scores).parent, directions)
    write_csv(Path(snakemake.output.timing), timing)
    append_manifest(
        Path(snakemake.output.manifest),
        manifest_entry(
            config=redact(config),
            model_name=snakemake.wildcards.model,
            model_settings=model_settings(model_entry(config, snakemake.wildcards.model)),
            dataset_identity=resolve_dataset(config["dataset"], fetch=False).identity,
            directions=directions,
            metric_signatures=recorded_signatures([Path(path) for path in snakemake.input]),
            resampling=resampling,
            timing=timing_totals(timing),
        ),
    )
    log.info("%d directions aggregated into %s", len(scores), snakemake.output.scores)
