"""Rule script: print the directions each model has translated and scored (run by Snakemake)."""

from pathlib import Path

from bouquet_eval.config import expand_path
from bouquet_eval.data import Direction, resolve_dataset
from bouquet_eval.jobs import SnakemakeJob
from bouquet_eval.progress import progress_table, run_progress
from bouquet_eval.provenance import known_secrets


def main(snakemake: SnakemakeJob) -> None:
    config = snakemake.config
    table = progress_table(
        run_progress(
            config,
            [Direction.parse(name) for name in snakemake.params.directions],
            resolve_dataset(config["dataset"], fetch=False),
            expand_path(config["output_dir"]),
            known_secrets(config),
        )
    )
    Path(snakemake.log[0]).parent.mkdir(parents=True, exist_ok=True)
    Path(snakemake.log[0]).write_text(table + "\n", encoding="utf-8")
    print(table, flush=True)


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
