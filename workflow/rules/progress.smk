# `snakemake progress --nolock`: directions translated and scored, per model, out of those
# selected. It reads only the outputs, so it can run beside a run that is writing them.
rule progress:
    input:
        once_while_planning,
    log:
        "logs/progress.log",
    localrule: True
    conda:
        "../../envs/workflow.yaml"
    params:
        plan=PLAN,
    script:
        "../../scripts/rules/progress.py"
