"""Rule script: print the directions each model has translated and scored (run by Snakemake)."""

from pathlib import Path

from bouquet_eval.core.jobs import SnakemakeJob
from bouquet_eval.planning.progress import progress_table, run_progress


def main(snakemake: SnakemakeJob) -> None:
    table = progress_table(run_progress(snakemake.params.plan))
    Path(snakemake.log[0]).parent.mkdir(parents=True, exist_ok=True)
    Path(snakemake.log[0]).write_text(table + "\n", encoding="utf-8")
    print(table, flush=True)


if __name__ == "__main__":  # not in a child that re-imports this script: see SnakemakeJob
    main(globals()["snakemake"])
