# A model's aggregates. They are update() outputs: when the job fails, Snakemake puts the
# previous ones back, so a failure never leaves a model without them; that they are then not
# current is seen from their provenance records (see aggregate_stamp in planning.smk).
import re


rule aggregate:
    input:
        scored=scored_files_of_model,
        stamp=aggregate_stamp,
    output:
        scores=update(OUTPUT_DIR / "{model}" / "scores.csv"),
        summary=update(OUTPUT_DIR / "{model}" / "summary.csv"),
        timing=update(OUTPUT_DIR / "{model}" / "timing.csv"),
        scored_rows=update(OUTPUT_DIR / "{model}" / "scored_rows.parquet"),
        # Its bootstrap resamples, which the leaderboard and the report read.
        resampled=update(OUTPUT_DIR / "{model}" / "resampled.npz"),
        # What the report's pages that span models take of its sentences, from the rows it
        # writes (results/extracts.py).
        extract=update(OUTPUT_DIR / "{model}" / EXTRACT_FILE),
        # The manifest is a history: Snakemake must not delete it before the job runs.
        manifest=update(OUTPUT_DIR / "{model}" / "manifest.json"),
    log:
        "logs/{model}/aggregate.log",
    benchmark:
        "logs/{model}/aggregate.benchmark.tsv"
    wildcard_constraints:
        model="|".join(re.escape(name) for name in MODELS),
    conda:
        "../../envs/workflow.yaml"
    envmodules:
        *job_envmodules("aggregate"),
    threads: job_settings("aggregate")["cpus"]
    resources:
        **job_resources("aggregate", 0),
    params:
        settings=lambda wildcards: PLAN.settings("aggregate", wildcards.model),
        plan=PLAN,
    script:
        "../../scripts/rules/aggregate.py"
