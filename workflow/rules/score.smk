# Scoring follows the shards of translation, so that a metric model loads once per job. The
# dataset's files are inputs too: translations are checked against them before scoring.
for model in MODELS.values():
    for shard, directions in model_shards(model).items():

        rule:
            name:
                rule_name("score", model, shard)
            input:
                translations=[translation_file(model, d) for d in directions],
                dataset=dataset_files(directions),
                stamp=score_stamp(model, shard, directions),
            output:
                [update(scored_file(model, direction)) for direction in directions],
            log:
                f"logs/{model['name']}/score/{shard}.log",
            benchmark:
                f"logs/{model['name']}/score/{shard}.benchmark.tsv"
            conda:
                score_environment()
            threads: config["resources"]["score"]["cpus"]
            resources:
                gpu=score_gpus(),
                mem_mb=grows_with_attempt("score", "mem_mb"),
                runtime=grows_with_attempt("score", "runtime"),
            params:
                metrics=config["metrics"],
                metric_settings=metric_settings(),
            script:
                "../../scripts/rules/score.py"
