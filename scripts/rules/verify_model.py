"""Rule script: rescore one model's translations from scratch and compare with scores.csv."""

from pathlib import Path

from bouquet_eval.core.gpus import gpu_lease
from bouquet_eval.core.jobs import GPU_LEASES, SnakemakeJob, job_logging
from bouquet_eval.metrics import load_metrics
from bouquet_eval.results.aggregate import write_csv
from bouquet_eval.results.verify import (
    FAILED,
    TOLERANCES,
    compare_scores,
    directions_to_verify,
    read_claim,
    rescore,
)


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]) as log, gpu_lease(snakemake.resources.gpu, GPU_LEASES):
        plan = snakemake.params.plan
        output = Path(snakemake.output[0])
        claimed = read_claim(output.parent / "scores.csv")
        recomputed = rescore(
            output.parent,
            directions_to_verify(list(plan.directions), claimed),
            plan.dataset,
            plan.limit,
            load_metrics(plan.metrics, plan.config),
            plan.resampling,
        )
        verification = compare_scores(
            claimed, recomputed, {**TOLERANCES, **snakemake.params.tolerance}
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
