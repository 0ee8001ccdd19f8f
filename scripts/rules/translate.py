"""Rule script: translate the directions of one shard (run by Snakemake)."""

from pathlib import Path

from bouquet_eval.core.gpus import gpu_lease
from bouquet_eval.core.jobs import GPU_LEASES, SnakemakeJob, job_logging
from bouquet_eval.core.shared_memory import SharedMemoryLedger
from bouquet_eval.data.outputs import direction_of
from bouquet_eval.translation.translate import translate_planned

# Per job: the shared memory its translator's processes hold (vLLM's), for the next run of the
# job to release where this one is killed.
SHARED_MEMORY_LEDGERS = Path(".snakemake") / "bouquet-eval" / "shared-memory"


def main(snakemake: SnakemakeJob) -> None:
    ledger = SharedMemoryLedger(SHARED_MEMORY_LEDGERS / f"{snakemake.rule}.json")
    with (
        job_logging(snakemake.log[0]),
        gpu_lease(snakemake.resources.gpu, GPU_LEASES),
        ledger.watching(),
    ):
        plan = snakemake.params.plan
        translate_planned(
            plan.models[snakemake.params.model],
            snakemake.params.settings,
            [direction_of(path) for path in snakemake.output],
            plan.dataset,
            plan.stall_timeout,
            plan.secrets(),
        )


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
