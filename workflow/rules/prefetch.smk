# Run on a machine with network access (a login node) before compute jobs that run with
# HF_HUB_OFFLINE=1: `snakemake prefetch`. The dataset is fetched while the workflow is parsed.
rule prefetch:
    log:
        "logs/prefetch.log",
    conda:
        "../../envs/workflow.yaml"
    script:
        "../../scripts/rules/prefetch.py"
