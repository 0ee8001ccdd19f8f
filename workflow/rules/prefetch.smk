# Run on a machine with network access (a login node) before runs or jobs without it
# (HF_HUB_OFFLINE=1): `snakemake prefetch` fetches the dataset, the hub models of the
# translators and the metric models, each at its revision, into the Hugging Face cache.
rule prefetch:
    input:
        once_while_planning,
    log:
        "logs/prefetch.log",
    conda:
        "../../envs/workflow.yaml"
    params:
        settings=PLAN.settings("prefetch"),
        plan=PLAN,
    script:
        "../../scripts/rules/prefetch.py"
