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
        models=list(MODELS),
        metrics=config["metrics"],
        directions=[direction.name for direction in DIRECTIONS],
        plan=PLAN,
    script:
        "../../scripts/rules/mtme.py"
