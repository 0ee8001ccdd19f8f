"""Rule script: rescore one model's translations (its own run's, or those of a received
submission) from scratch and compare with its scores.csv."""

import tempfile
from pathlib import Path

from bouquet_eval.core.gpus import gpu_lease
from bouquet_eval.core.jobs import GPU_LEASES, SnakemakeJob, job_logging
from bouquet_eval.core.stats import Resampling
from bouquet_eval.metrics import load_metrics
from bouquet_eval.results.aggregate import write_csv
from bouquet_eval.results.verify import (
    FAILED,
    Rescoring,
    compare_scores,
    directions_to_verify,
    read_claim,
    tolerances,
)


def main(snakemake: SnakemakeJob) -> None:
    with (
        job_logging(snakemake.log[0]) as log,
        gpu_lease(snakemake.resources.gpu, GPU_LEASES),
        tempfile.TemporaryDirectory(prefix="received-") as unpacked,
        tempfile.TemporaryDirectory(prefix="rescored-") as scratch,
    ):
        plan, settings = snakemake.params.plan, snakemake.params.settings
        output = Path(snakemake.output[0])
        submission = snakemake.params.submission
        configured = list(plan.directions)
        folder = output.parent
        if submission is not None:
            # Only scores.csv and the translations of the dataset's directions it lists, under
            # names made from those directions; nothing else of the submission is read.
            folder = Path(unpacked)
            for notice in submission.notices():
                log.info("%s", notice)
            submission.unpack(folder, [*configured, *submission.directions])
            log.info("submission '%s': its files to be read are in %s", submission.source, folder)
        claimed = read_claim(folder / "scores.csv")
        metrics = load_metrics(settings["metrics"], settings)
        rescoring = Rescoring(
            folder,
            directions_to_verify(configured, claimed, plan.dataset.directions()),
            plan.dataset,
            settings["limit"],
            list(settings["metrics"]),
            dict(settings),
            Resampling(**settings["statistics"]),
            Path(scratch) / "recomputed.parquet",
        )
        # In the Python of the metrics' own environment, when the configuration names one.
        python = snakemake.params.python.value
        recomputed = (
            rescoring.scores_in(python, Path(snakemake.log[0])) if python else rescoring.scores()
        )
        verification = compare_scores(
            claimed, recomputed, {**tolerances(metrics), **settings["verify"]["tolerance"]}
        )
        write_csv(output, verification)
        log.info(
            "%d values compared, %d differ or are not claimed: %s",
            len(verification),
            int(verification["status"].isin(FAILED).sum()),
            output,
        )


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
