"""Rule script: print the directions each model has translated and scored (run by Snakemake)."""

from pathlib import Path

from bouquet_eval.progress import progress_table, run_progress

snakemake = globals()["snakemake"]

table = progress_table(run_progress(snakemake.params.plan))
Path(snakemake.log[0]).parent.mkdir(parents=True, exist_ok=True)
Path(snakemake.log[0]).write_text(table + "\n", encoding="utf-8")
print(table, flush=True)
