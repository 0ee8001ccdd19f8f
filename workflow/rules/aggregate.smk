rule aggregate:
    input:
        scored_files_of_model,
    output:
        scores=OUTPUT_DIR / "{model}" / "scores.csv",
        summary=OUTPUT_DIR / "{model}" / "summary.csv",
        timing=OUTPUT_DIR / "{model}" / "timing.csv",
        scored_rows=OUTPUT_DIR / "{model}" / "scored_rows.parquet",
        # The manifest is a history: Snakemake must not delete it before the job runs.
        manifest=update(OUTPUT_DIR / "{model}" / "manifest.json"),
    log:
        "logs/{model}/aggregate.log",
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
        metrics=config["metrics"],
        metric_settings=metric_settings(),
        statistics=config["statistics"],
        directions=[direction.name for direction in DIRECTIONS],
    script:
        "../../scripts/rules/aggregate.py"
