"""Rule script: rescore one model's translations (its own run's, or those of a received
submission) from scratch and compare with its scores.csv."""

import tempfile
from pathlib import Path

from bouquet_eval.core.gpus import gpu_lease
from bouquet_eval.core.jobs import GPU_LEASES, SnakemakeJob, job_logging
from bouquet_eval.core.stats import Resampling
from bouquet_eval.data.received import CLAIM, ArchiveLimits
from bouquet_eval.metrics import load_metrics
from bouquet_eval.results.aggregate import write_csv
from bouquet_eval.results.verify import (
    FAILED,
    Rescoring,
    compare_scores,
    directions_to_verify,
    read_claim,
    tolerances,
    what_was_checked,
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
        known = plan.dataset.directions()
        folder = output.parent
        label = str(folder / CLAIM)
        if submission is not None:
            # Only scores.csv and the translations of the dataset's directions, under names
            # made from those directions; nothing else of the submission is read.
            folder = Path(unpacked)
            for notice in submission.notices():
                log.info("%s", notice)
            submission.unpack(folder, known)
            label = submission.file_label(CLAIM)
            log.info("%s: unpacked within verify.limits", submission.label)
        limits = submission.limits if submission is not None else ArchiveLimits()
        claimed = read_claim(folder / CLAIM, label, known, limits)
        metrics = load_metrics(settings["metrics"], settings)
        rescoring = Rescoring(
            folder,
            directions_to_verify(configured, claimed),
            plan.dataset,
            settings["limit"],
            list(settings["metrics"]),
            dict(settings),
            Resampling(**settings["statistics"]),
            Path(scratch) / "recomputed.parquet",
            submission,
        )
        # In the Python of the metrics' own environment, when the configuration names one.
        python = snakemake.params.python.value
        recomputed = (
            rescoring.scores_in(python, Path(snakemake.log[0])) if python else rescoring.scores()
        )
        verification = compare_scores(
            claimed.frame, recomputed, {**tolerances(metrics), **settings["verify"]["tolerance"]}
        )
        write_csv(output, verification)
        log.info(
            "%d values compared, %d differ or are not claimed; %s: %s",
            len(verification),
            int(verification["status"].isin(FAILED).sum()),
            what_was_checked(verification),
            output,
        )


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
