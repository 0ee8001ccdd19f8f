# A submission per model (`snakemake submission`) and the check of a model's claimed scores
# (`snakemake verify`); neither is part of `all`.
import re


rule submission_model:
    input:
        scores=OUTPUT_DIR / "{model}" / "scores.csv",
        summary=OUTPUT_DIR / "{model}" / "summary.csv",
        manifest=OUTPUT_DIR / "{model}" / "manifest.json",
        translations=translations_of_model,
    output:
        # The folder's checksum list stands for the folder, which a directory() output would
        # litter with Snakemake's timestamp file.
        checksums=OUTPUT_DIR / "submission" / "{model}" / "SHA256SUMS",
        archive=OUTPUT_DIR / "submission" / "{model}.tar.gz",
    log:
        "logs/{model}/submission.log",
    wildcard_constraints:
        model="|".join(re.escape(name) for name in MODELS),
    conda:
        "../../envs/workflow.yaml"
    params:
        directions=[direction.name for direction in DIRECTIONS],
        # Each metric's score column: its eval-results entry.
        headline={metric.name: score_columns([metric])[0] for metric in METRICS},
        lower_is_better=sorted(METRIC_SET.lower_is_better()),
        # Eval results only for a run of every direction of the dataset.
        dataset_directions=[direction.name for direction in DATASET.directions()],
    script:
        "../../scripts/rules/submission.py"


rule submission:
    input:
        [submission_folder(name) / "SHA256SUMS" for name in MODELS],
        [f"{submission_folder(name)}.tar.gz" for name in MODELS],


# The claim is no input: it is checked as it stands, and nothing upstream may rewrite it
# first; the sentences it is checked against are. `{model}` is a configured model's folder, or
# received/<name> for a received submission (`submissions`), which is read as data only
# (bouquet_eval.data.received).
rule verify_model:
    input:
        once_while_planning,
        dataset_files(DIRECTIONS),
    output:
        OUTPUT_DIR / "{model}" / "verification.csv",
    log:
        "logs/{model}/verify.log",
    wildcard_constraints:
        model="|".join(re.escape(name) for name in CLAIMS),
    conda:
        verify_environment()
    envmodules:
        *verify_envmodules(),
    threads: job_settings("score")["cpus"]
    resources:
        **job_resources("score", score_gpus()),
    params:
        settings=PLAN.settings("verify"),
        # The digests of the claim as it stands: a changed claim reruns the check.
        claim=claim_digests,
        submission=lambda wildcards: CLAIMS[wildcards.model],
        plan=PLAN,
        python=Unrecorded(verify_python()),
    script:
        "../../scripts/rules/verify_model.py"


# Fails, naming the model, direction, metric and both values, when a claim does not hold.
rule verify:
    input:
        [OUTPUT_DIR / folder / "verification.csv" for folder in VERIFIED],
    log:
        "logs/verify.log",
    conda:
        "../../envs/workflow.yaml"
    params:
        models=[folder.removeprefix(RECEIVED) for folder in VERIFIED],
    script:
        "../../scripts/rules/verify.py"
