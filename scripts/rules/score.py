"""Rule script: score the directions of one shard (run by Snakemake)."""

from pathlib import Path

from bouquet_eval.data import Direction
from bouquet_eval.gpus import gpu_lease
from bouquet_eval.jobs import GPU_LEASES, job_logging
from bouquet_eval.metrics import load_metrics
from bouquet_eval.score import score_directions

snakemake = globals()["snakemake"]

with job_logging(snakemake.log[0]), gpu_lease(snakemake.resources.gpu, GPU_LEASES):
    score_directions(
        [
            Direction.parse(Path(path).name.removesuffix(".scored.parquet"))
            for path in snakemake.output
        ],
        Path(snakemake.output[0]).parent,
        load_metrics(snakemake.params.metrics, snakemake.config),
    )
