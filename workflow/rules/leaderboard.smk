# The leaderboard across models and the figures of the Snakemake report, in one job (it
# reads the scored rows once): part of `all`.
rule leaderboard:
    input:
        scores=model_files("scores.csv"),
        scored_rows=model_files("scored_rows.parquet"),
        resampled=model_files("resampled.npz"),
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
        heatmaps=figures_of_models("heatmaps", "../report/heatmap.rst", "4. Heatmaps"),
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
        models=list(MODELS),
        metrics=config["metrics"],
        statistics=config["statistics"],
        plan=PLAN,
        baseline=config["compare"]["baseline"],
    script:
        "../../scripts/rules/leaderboard.py"
