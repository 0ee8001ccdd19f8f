# Scoring follows the shards of translation, so that a metric model loads once per job. The
# job also reads the dataset's files, to check the translations against them; a change to one
# is seen by the planner (score_stamp), which keeps Snakemake's inputs, and so its plan, small.
# Judged systems (metaeval) are scored by the same jobs, each as a model of its own.
for model in [*MODELS.values(), *PLAN.judged.values()]:
    for shard, directions in model_shards(model).items():

        rule:
            name:
                rule_name("score", model, shard)
            input:
                translations=[translation_file(model, d) for d in directions],
                stamp=score_stamp(model, shard, directions),
            output:
                [update(scored_file(model, direction)) for direction in directions],
            log:
                f"logs/{model.name}/score/{shard}.log",
            benchmark:
                f"logs/{model.name}/score/{shard}.benchmark.tsv"
            conda:
                score_environment()
            envmodules:
                *job_envmodules("score"),
            threads: job_settings("score")["cpus"]
            resources:
                **job_resources("score", score_gpus()),
            params:
                plan=PLAN,
            script:
                "../../scripts/rules/score.py"
