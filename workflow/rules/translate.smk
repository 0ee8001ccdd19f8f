# One job per model and shard: the translator is loaded once and translates every direction
# of its shard that is not current. Outputs are update() so that Snakemake keeps the finished
# directions of a shard when it reruns for a missing one; whether a kept output is current is
# decided from its provenance record (see translation_stamp in planning.smk and
# bouquet_eval.core.freshness).
for model in MODELS.values():
    if model.translated_in_place:
        continue
    for shard, directions in model_shards(model).items():

        rule:
            name:
                rule_name("translate", model, shard)
            input:
                dataset_files(directions),
                provided_translations(model, directions),
                translation_stamp(model, shard, directions),
            output:
                [update(translation_file(model, direction)) for direction in directions],
            log:
                f"logs/{model.name}/translate/{shard}.log",
            benchmark:
                f"logs/{model.name}/translate/{shard}.benchmark.tsv"
            conda:
                translator_environment(model)
            envmodules:
                *job_envmodules("translate", model),
            threads: job_settings("translate", model)["cpus"]
            resources:
                **job_resources("translate", model.gpus, model),
            params:
                # What the jobs read of the configuration, which Snakemake records and
                # compares; the plan's typed fields, which it does not (docs/design.md).
                settings=PLAN.settings("translate", model.name),
                plan=PLAN,
                model=model.name,
            script:
                "../../scripts/rules/translate.py"
