"""Rule script: correlations.csv, every metric's agreement with the human judgements."""

from pathlib import Path

import pandas as pd

from bouquet_eval.core.io import write_atomically
from bouquet_eval.core.jobs import SnakemakeJob, job_logging
from bouquet_eval.results.correlations import (
    Settings,
    correlations,
    metric_scores,
    oriented,
    scored_columns,
)
from bouquet_eval.results.mtme_judged import export_judgements
from bouquet_eval.results.report import write_text
from bouquet_eval.results.trust import TRUST_STYLE, trust_data, trust_page


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log:
        plan, settings = snakemake.params.plan, snakemake.params.settings
        table = plan.judgements.load(plan.dataset.directions())
        metrics = scored_columns(settings["metrics"], settings)
        columns = metrics.columns
        folders = {system: model.folder for system, model in plan.judged.items()}
        scores = oriented(metric_scores(table, folders, columns), set(metrics.lower_is_better))
        statistics = Settings.of(settings)
        trained = metrics.trained(table)
        frame = correlations(table, scores, statistics, trained, workers=snakemake.threads)
        output = Path(snakemake.output.correlations)
        write_atomically(output, lambda temporary: frame.to_csv(temporary, index=False))
        data = trust_data(pd.read_csv(output), statistics.decide_by, statistics.significance)
        write_text(Path(snakemake.output.page), trust_page(data, TRUST_STYLE))
        left_out = export_judgements(
            Path(snakemake.output.mtme), table, scores, metrics.reference_free
        )
        for lp, names in left_out.items():
            log.info("MTME export, %s: %s left out (missing scores)", lp, ", ".join(names))
        log.info("%d judged translations, %d metrics: %s", len(table), len(columns), output)


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
