"""Rule script: translate the directions of one shard (run by Snakemake)."""

from pathlib import Path

from bouquet_eval.data import resolve_dataset
from bouquet_eval.gpus import gpu_lease
from bouquet_eval.jobs import GPU_LEASES, SnakemakeJob, job_logging, model_entry
from bouquet_eval.outputs import direction_of
from bouquet_eval.provenance import known_secrets
from bouquet_eval.translate import translate_model


def main(snakemake: SnakemakeJob) -> None:
    with job_logging(snakemake.log[0]), gpu_lease(snakemake.resources.gpu, GPU_LEASES):
        config = snakemake.config
        translate_model(
            model_entry(config, snakemake.params.model),
            [direction_of(path) for path in snakemake.output],
            resolve_dataset(config["dataset"], fetch=False),
            Path(snakemake.output[0]).parent,
            config["limit"],
            known_secrets(config),
            config["stall_timeout"],
        )


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
