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
        plan=PLAN,
        models=compared_models(),
        baseline=compare_baseline(),
        # Only so that a change reruns the job: Snakemake records builtin values, never the
        # plan, which is what the script reads.
        rerun_when={"metrics": list(PLAN.metrics), "statistics": PLAN.statistics},
    script:
        "../../scripts/rules/compare.py"
