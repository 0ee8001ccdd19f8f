# Not part of `all`: request it by name (`snakemake compare`).
rule compare:
    input:
        scored_rows_of_compared_models(),
    output:
        OUTPUT_DIR / "comparison.csv",
    log:
        "logs/compare.log",
    conda:
        "../../envs/workflow.yaml"
    params:
        settings=PLAN.settings("compare"),
        models=compared_models(),
    script:
        "../../scripts/rules/compare.py"
