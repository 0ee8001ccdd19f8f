# Helpers and constants of the results rules (leaderboard.smk, submission.smk).
from bouquet_eval.results.leaderboard import primary_metric, score_columns
from bouquet_eval.results.report import figure_paths
from bouquet_eval.results.verify import claim_fingerprint

# Snakemake's report(), under a name its parser does not take for the `report:` keyword when
# it starts a line.
from snakemake.io import report as report_item

# The per-sentence score columns of the configured metrics (labels such as GlotLID's
# predicted language left out): one figure each.
SCORE_COLUMNS = score_columns(METRICS)
REPORT_DIR = OUTPUT_DIR / "report"
# The report lists a category's figures in order of their labels: numbered, the metric that
# ranks the leaderboard first.
METRIC_LABELS = {
    column: f"{number}. {column}"
    for number, column in enumerate(
        sorted(SCORE_COLUMNS, key=lambda c: c != primary_metric(SCORE_COLUMNS)), start=1
    )
}
FIGURES = figure_paths(
    REPORT_DIR, list(MODELS), SCORE_COLUMNS, [str(d) for d in DIRECTIONS]
)


def model_files(name):
    """One file of every configured model's folder, in the order of `models`."""
    return [f"{model_dir(model)}/{name}" for model in MODELS.values()]


def figures_of_models(kind, caption, category):
    """report() outputs of one figure per model and metric, labelled with both."""
    return [
        report_item(
            path,
            caption=caption,
            category=category,
            subcategory=model,
            labels={"model": model, "metric": METRIC_LABELS[column]},
        )
        for (model, column), path in FIGURES[kind].items()
    ]


from bouquet_eval.results.verify import claim_fingerprint


def translations_of_model(wildcards):
    return [translation_file(MODELS[wildcards.model], d) for d in DIRECTIONS]


def submission_folder(name):
    return OUTPUT_DIR / "submission" / name


# What `verify` checks, by folder under OUTPUT_DIR: the received submissions when any are
# given, which are read as data only, else the configured models' own runs.
RECEIVED = "received/"
CLAIMS = {name: None for name in MODELS} | {
    f"{RECEIVED}{name}": submission for name, submission in PLAN.received.items()
}
VERIFIED = [f"{RECEIVED}{name}" for name in PLAN.received] or list(MODELS)


def verification_fingerprint(wildcards):
    """Digests of the claim and the translations as they stand: a change redoes the check."""
    submission = CLAIMS[wildcards.model]
    if submission is not None:
        return submission.fingerprint()
    return claim_fingerprint(OUTPUT_DIR / wildcards.model)
