# Scoring follows the shards of translation, so that a metric model loads once per job. Each
# family of metrics (one per environment, on the CPU or with a GPU: their records say) scores
# in jobs of its own, which hold only what it needs and write each metric's columns apart; a
# local job per shard gathers them into each direction's scored file. Where the metrics are one
# family, its jobs write the scored files themselves. The jobs also read the dataset's files, to
# check the translations against them; a change to one is seen by the planner (the stamps),
# which keeps Snakemake's inputs, and so its plan, small.
# Judged systems (metaeval) are scored by the same jobs, each as a model of its own.
for model in [*MODELS.values(), *PLAN.judged.values()]:
    for shard, directions in model_shards(model).items():
        for family, names in METRIC_SET.families().items():

            rule:
                name:
                    rule_name(f"score_{family}", model, shard)
                input:
                    translations=[translation_file(model, d) for d in directions],
                    stamp=metric_scores_stamp(model, family, shard, directions),
                output:
                    [
                        update(metric_scores_file(model, name, direction))
                        for name in names
                        for direction in directions
                    ]
                    + [
                        update(scored_file(model, direction))
                        for direction in directions
                        if METRIC_SET.gathered_in_score_jobs()
                    ],
                log:
                    f"logs/{model.name}/score/{family}/{shard}.log",
                benchmark:
                    f"logs/{model.name}/score/{family}/{shard}.benchmark.tsv"
                conda:
                    score_environment(family)
                envmodules:
                    *job_envmodules("score", family=family),
                threads: job_settings("score", family=family)["cpus"]
                resources:
                    **job_resources("score", score_gpus(family), family=family),
                params:
                    settings=PLAN.settings("score", family=family),
                    plan=PLAN,
                    metrics=names,
                    python=Unrecorded(family_python(family)),
                script:
                    "../../scripts/rules/score_metrics.py"

        if METRIC_SET.gathered_in_score_jobs():
            continue

        rule:
            name:
                rule_name("score", model, shard)
            input:
                translations=[translation_file(model, d) for d in directions],
                metrics=[
                    metric_scores_file(model, name, direction)
                    for name in PLAN.metrics
                    for direction in directions
                ],
                stamp=score_stamp(model, shard, directions),
            output:
                [update(scored_file(model, direction)) for direction in directions],
            log:
                f"logs/{model.name}/score/{shard}.log",
            localrule: True
            conda:
                "../../envs/workflow.yaml"
            threads: 1
            params:
                settings=PLAN.settings("score"),
                plan=PLAN,
            script:
                "../../scripts/rules/score.py"
