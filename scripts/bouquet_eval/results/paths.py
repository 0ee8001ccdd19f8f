"""Where the report's figures and pages go: the paths the results code writes and the workflow
declares as the outputs of its report (workflow/rules/leaderboard.smk, metaeval.smk)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bouquet_eval.results.views import sentence_parts


def heatmap_path(folder: Path, model: str, column: str) -> Path:
    return folder / "heatmaps" / f"{model}.{column}.svg"


def ranked_name(leaderboard: Path, model: str) -> str:
    """A model's name after its place in the leaderboard (`leaderboard.csv`), "2. my-model",
    numbered so that an alphabetical order of them is the leaderboard's (Snakemake's report
    sorts the entries of a category by name); the name alone while there is no leaderboard."""
    if not leaderboard.is_file():
        return model
    import pandas as pd

    order = pd.read_csv(leaderboard, usecols=["model"])["model"].astype(str).tolist()
    if model not in order:
        return model
    return f"{order.index(model) + 1:0{len(str(len(order)))}d}. {model}"


def trust_page_path(output_dir: Path) -> Path:
    """The page "Which metric to trust" of a run's meta-evaluation."""
    return output_dir / "metaeval" / "which-metric.html"


def figure_paths(
    folder: Path, models: Sequence[str], columns: Sequence[str], directions: Sequence[str]
) -> dict[str, Any]:
    """Where each figure and page of the leaderboard job goes. The sentences of the run's
    `directions` take one page per `views.SentencePart`."""
    pairs = [(model, column) for model in models for column in columns]
    parts = sentence_parts(directions, len(models))
    return {
        "leaderboard": folder / "leaderboard.html",
        "results": folder / "results.html",
        "sentences": {part: folder / f"sentences-{part.number}.html" for part in parts},
        "heatmaps": {(m, c): heatmap_path(folder, m, c) for m, c in pairs},
        "distributions": {c: folder / "distributions" / f"{c}.svg" for c in columns},
        "comparison": folder / "comparison.svg",
        "timing": folder / "timing.svg",
        "run": folder / "run.html",
    }
