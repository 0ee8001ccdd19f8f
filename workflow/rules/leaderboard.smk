# The leaderboard across models and the report's figures and pages that span models, in one
# job (it reads the models' extracts, and of their rows the primary metric's scores): part of
# `all`.


rule leaderboard:
    input:
        scores=model_files("scores.csv"),
        scored_rows=model_files("scored_rows.parquet"),
        resampled=model_files("resampled.npz"),
        # What the distributions and the sentences pages take of each model's sentences.
        extracts=model_files(EXTRACT_FILE),
        timing=model_files("timing.csv"),
        manifests=model_files("manifest.json"),
        # With human judgements configured, the page notes each metric's agreement with them.
        agreement=judged_agreement(),
    output:
        csv=OUTPUT_DIR / "leaderboard.csv",
        markdown=OUTPUT_DIR / "leaderboard.md",
        page=report(
            FIGURES["leaderboard"],
            caption="../report/leaderboard.rst",
            category="1. Leaderboard",
            labels={"figure": "leaderboard"},
        ),
        results=report(
            FIGURES["results"],
            caption="../report/results.rst",
            category="2. Results by language and direction",
            labels={"figure": "every direction, every model"},
        ),
        # Several pages, each small enough for report.html (see views.SENTENCES_PAGE_BYTES).
        sentences=[
            report(
                path,
                caption="../report/sentences.rst",
                category="3. Sentences",
                labels={
                    "languages": part.label,
                    "page": f"{part.number} of {part.count}",
                },
            )
            for part, path in FIGURES["sentences"].items()
        ],
        distributions=[
            report(
                path,
                caption="../report/distributions.rst",
                category="5. Distributions",
                labels={"metric": METRIC_LABELS[column]},
            )
            for column, path in FIGURES["distributions"].items()
        ],
        comparison=report(
            FIGURES["comparison"],
            caption="../report/comparison.rst",
            category="6. Paired comparison",
            labels={"figure": "comparison"},
        ),
        timing=report(
            FIGURES["timing"],
            caption="../report/timing.rst",
            category="7. Timing",
            labels={"figure": "timing"},
        ),
        run=report(
            FIGURES["run"],
            caption="../report/run.rst",
            category="8. Run",
            labels={"figure": "configuration and manifests"},
        ),
    log:
        "logs/leaderboard.log",
    conda:
        "../../envs/workflow.yaml"
    params:
        settings=PLAN.settings("leaderboard"),
        plan=PLAN,
        models=list(MODELS),
    script:
        "../../scripts/rules/leaderboard.py"


# Each model's heatmaps, from its scores alone (what the pages that span models take of its
# sentences, its report extract, is made by its aggregation). Adding a model draws only its own.
# Part of `all` beside the leaderboard.
rule heatmaps:
    input:
        scores=OUTPUT_DIR / "{model}" / "scores.csv",
    output:
        heatmaps=[
            report(
                heatmap_path(REPORT_DIR, "{model}", column),
                caption="../report/heatmap.rst",
                category="4. Heatmaps",
                subcategory="{model}",
                labels={"model": "{model}", "metric": METRIC_LABELS[column]},
            )
            for column in SCORE_COLUMNS
        ],
    log:
        "logs/{model}/heatmaps.log",
    wildcard_constraints:
        model="|".join(re.escape(name) for name in MODELS),
    conda:
        "../../envs/workflow.yaml"
    params:
        settings=PLAN.settings("heatmaps"),
        columns=SCORE_COLUMNS,
    script:
        "../../scripts/rules/heatmaps.py"
