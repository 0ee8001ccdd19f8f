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
        settings=PLAN.settings("mtme"),
        plan=PLAN,
        models=list(MODELS),
        # The directions exported, which no input file names.
        directions=[direction.name for direction in DIRECTIONS],
    script:
        "../../scripts/rules/mtme.py"
