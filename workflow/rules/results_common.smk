# Helpers and constants of the results rules (leaderboard.smk, submission.smk).
from bouquet_eval.results.leaderboard import score_columns
from bouquet_eval.results.report import figure_paths, heatmap_path
from bouquet_eval.results.verify import claim_fingerprint

# The per-sentence score columns of the configured metrics (labels such as GlotLID's
# predicted language left out): one figure each.
SCORE_COLUMNS = score_columns(METRICS)
REPORT_DIR = OUTPUT_DIR / "report"
FIGURES = figure_paths(REPORT_DIR, list(MODELS), SCORE_COLUMNS)


def model_files(name):
    """One file of every configured model's folder, in the order of `models`."""
    return [f"{model_dir(model)}/{name}" for model in MODELS.values()]


from bouquet_eval.results.verify import claim_fingerprint


def translations_of_model(wildcards):
    return [translation_file(MODELS[wildcards.model], d) for d in DIRECTIONS]


def submission_folder(name):
    return OUTPUT_DIR / "submission" / name


def verification_fingerprint(wildcards):
    """Digests of the claim and the translations as they stand: a change redoes the check."""
    return claim_fingerprint(OUTPUT_DIR / wildcards.model)
