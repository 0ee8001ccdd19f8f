# Meta-evaluation (`snakemake metaeval`, not part of `all`): each judged system's translations
# are written as a model's (metaeval_inputs), scored by the score jobs (score.smk), and every
# metric's agreement with the human scores goes to <output_dir>/metaeval/correlations.csv.
if PLAN.judgements is not None:

    rule metaeval_inputs:
        input:
            # Met-BOUQuET's files are downloaded into the cache while Snakemake plans.
            once_while_planning,
            [str(path) for path in PLAN.judgements.files],
        output:
            judged_inputs(),
        log:
            "logs/metaeval/inputs.log",
        conda:
            "../../envs/workflow.yaml"
        params:
            settings=PLAN.settings("metaeval_inputs"),
            plan=PLAN,
        script:
            "../../scripts/rules/metaeval_inputs.py"


rule metaeval:
    input:
        scored=judged_scored,
    output:
        correlations=OUTPUT_DIR / "metaeval" / "correlations.csv",
        page=report(
            OUTPUT_DIR / "metaeval" / "which-metric.html",
            caption="../report/trust.rst",
            category="9. Which metric to trust",
            labels={"figure": "agreement with people, per direction"},
        ),
        # The judged translations with human and metric scores in MT Metrics Eval's layout.
        mtme=directory(OUTPUT_DIR / "mtme" / "metbouquet"),
    log:
        "logs/metaeval/correlations.log",
    benchmark:
        "logs/metaeval/correlations.benchmark.tsv"
    conda:
        "../../envs/workflow.yaml"
    # Two threads compute the bootstrap resamples and permutation trials side by side.
    threads: 2
    params:
        settings=PLAN.settings("metaeval"),
        plan=PLAN,
    script:
        "../../scripts/rules/metaeval.py"
