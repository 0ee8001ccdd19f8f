# MT Metrics Eval's layout (`snakemake mtme`): not part of `all`.
rule mtme:
    input:
        scores=model_files("scores.csv"),
        scored_rows=model_files("scored_rows.parquet"),
    output:
        directory(OUTPUT_DIR / "mtme" / "bouquet"),
    log:
        "logs/mtme.log",
    conda:
        "../../envs/workflow.yaml"
    params:
        plan=PLAN,
        models=list(MODELS),
        # Only so that a change reruns the job: Snakemake records builtin values, never the
        # plan, which is what the script reads.
        rerun_when={
            "metrics": list(PLAN.metrics),
            "directions": [direction.name for direction in DIRECTIONS],
        },
    script:
        "../../scripts/rules/mtme.py"
