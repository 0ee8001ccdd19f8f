"""The report's figures: SVG (matplotlib's; each model's heatmaps written directly,
`results.heatmaps`).

Vector graphics stay sharp at any zoom, which the heatmap of BOUQuET's ~1000 directions needs,
their text stays text (searchable), and they need no JavaScript, so they render offline and
identically in any browser or image viewer.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bouquet_eval.core.io import write_text
from bouquet_eval.metrics.records import builtin_ranges
from bouquet_eval.results.aggregate import ENGLISH, GROUP_COLUMNS
from bouquet_eval.results.extracts import finite_values
from bouquet_eval.results.heatmaps import Heatmap, heatmap_svg
from bouquet_eval.results.leaderboard import format_score

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Below this many languages, every heatmap cell carries its value as text (and is larger).
ANNOTATED_LANGUAGES = 24
# The heatmap shows at most this many languages (the most paired with each other).
HEATMAP_LANGUAGES = 40


def _figure(width: float, height: float) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams.update({"svg.fonttype": "none", "font.size": 9, "svg.hashsalt": "bouquet"})
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def svg_text(figure: Figure) -> str:
    buffer = io.StringIO()
    # No date in the file: the same results give the same bytes.
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


def write_svg(path: Path, figure: Figure) -> None:
    write_text(path, svg_text(figure))


def better(column: str, lower: set[str], targets: Mapping[str, float] | None = None) -> str:
    """Which of a column's values is best: the lowest, the highest, or its target's
    (`MetricRecord.targets`)."""
    if targets and column in targets:
        return f"closest to {targets[column]:g} is best"
    return "lower is better" if column in lower else "higher is better"


def language_order(scores: pd.DataFrame) -> list[str]:
    """English first (most directions pass through it), then the others alphabetically."""
    languages = set(scores["src_lang"]) | set(scores["tgt_lang"])
    return sorted(languages, key=lambda code: (code != ENGLISH, code))


def dense_languages(scores: pd.DataFrame, limit: int) -> list[str]:
    """At most `limit` languages among which many directions were evaluated.

    BOUQuET pairs every language with English and only some with each other: a matrix of all
    of them is almost empty. The languages with the fewest directions to the languages still
    kept are dropped one at a time (the peeling that approximates the densest subgraph) until
    `limit` remain; ties drop the code that sorts last, so the choice is deterministic.
    """
    codes = language_order(scores)
    index = {code: i for i, code in enumerate(codes)}
    paired = np.zeros((len(codes), len(codes)), dtype=np.int64)
    sources = scores["src_lang"].map(index).to_numpy()
    targets = scores["tgt_lang"].map(index).to_numpy()
    paired[sources, targets] = 1
    np.fill_diagonal(paired, 0)
    links = paired + paired.T  # directions between two languages, either way
    degree = links.sum(axis=1)
    kept = set(codes)
    while len(kept) > limit:
        dropped = min(kept, key=lambda code: (degree[index[code]], [-ord(c) for c in code]))
        kept.remove(dropped)
        degree -= links[index[dropped]]
    return [code for code in codes if code in kept]


def heatmap(
    scores: pd.DataFrame,
    column: str,
    model: str,
    lower: set[str],
    targets: Mapping[str, float] | None = None,
) -> str:
    """Source x target matrix of a model's direction means on one metric, among the
    `HEATMAP_LANGUAGES` languages most paired with each other (`dense_languages`), as SVG
    (`results.heatmaps`: drawn directly, not through matplotlib); a column with a target
    (`targets`) coloured by the distance to it (`heatmaps.colour_scale`)."""
    every = language_order(scores)
    languages = dense_languages(scores, HEATMAP_LANGUAGES)
    shown = scores["src_lang"].isin(languages) & scores["tgt_lang"].isin(languages)
    scores = scores[shown]
    index = {code: i for i, code in enumerate(languages)}
    matrix = np.full((len(languages), len(languages)), np.nan)
    rows, columns = scores["src_lang"].map(index), scores["tgt_lang"].map(index)
    matrix[rows.to_numpy(), columns.to_numpy()] = scores[column].to_numpy(dtype=float)
    # A metric with a fixed range has it as its colour scale, so that heatmaps of different
    # models can be compared by eye; another, the range of its values.
    finite = matrix[np.isfinite(matrix)]
    low, high = builtin_ranges().get(column, (None, None))
    if low is None or high is None:
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    title = [f"{model}: {column} per direction ({better(column, lower, targets)})"]
    if len(languages) != len(every):
        title.append(
            f"{int(shown.sum())} of {len(shown)} directions: the {len(languages)} most paired "
            "languages"
        )
    scale = float(np.abs(finite).max(initial=0))
    drawn = Heatmap(
        matrix=matrix,
        languages=languages,
        title=title,
        label=column,
        value_range=(float(low), float(high)),
        # One colour scale for "better" whatever the metric's direction: bright is good.
        reverse=column in lower,
        annotated=len(languages) <= ANNOTATED_LANGUAGES,
        target=(targets or {}).get(column),
    )
    return heatmap_svg(drawn, lambda value: format_score(value, scale))


def distributions(
    violins: Mapping[str, dict[str, Any] | None],
    column: str,
    lower: set[str],
    targets: Mapping[str, float] | None = None,
) -> Figure:
    """Violin plots of sentence scores per model (`violin_of`), with the mean marked."""
    names = list(violins)
    figure = _figure(7.5, max(2.5, 0.6 * len(names) + 1.3))
    axes = figure.add_subplot()
    shown = [(i, v) for i, name in enumerate(names) if (v := violins[name]) is not None]
    if shown:
        axes.violin(
            [v for _, v in shown],
            [i for i, _ in shown],
            orientation="horizontal",
            showmedians=True,
            showextrema=True,
        )
        axes.scatter(
            [v["mean"] for _, v in shown],
            [i for i, _ in shown],
            marker="D",
            s=18,
            color="black",
            zorder=3,
            label="mean",
        )
        axes.legend(loc="lower right")
    axes.set_yticks(range(len(names)), names)
    axes.set_ylim(len(names) - 0.5, -0.5)
    axes.set_xlabel(f"{column} per sentence ({better(column, lower, targets)})")
    axes.set_title(f"Distribution of sentence scores: {column}")
    axes.grid(axis="x", alpha=0.3)
    return figure


def comparison(
    scores_by_model: Mapping[str, pd.DataFrame], board: pd.DataFrame, lower: set[str]
) -> Figure:
    """Per-direction differences of every ranked model from the best, on the primary metric."""
    primary = board.attrs["primary"]
    ranked = board[board["rank"].notna()]
    best = ranked["model"].iloc[0] if len(ranked) else None
    others = ranked.iloc[1:]
    figure = _figure(7.5, max(2.5, 0.6 * len(others) + 1.5))
    axes = figure.add_subplot()
    if best is None or others.empty:
        axes.text(
            0.5,
            0.5,
            "Only one ranked model: nothing to compare.",
            ha="center",
            va="center",
            transform=axes.transAxes,
        )
        axes.set_axis_off()
        return figure
    base = scores_by_model[best].set_index(GROUP_COLUMNS)[primary]
    labels = []
    for position, record in enumerate(others.to_dict(orient="records")):
        delta = (scores_by_model[record["model"]].set_index(GROUP_COLUMNS)[primary] - base).dropna()
        jitter = np.random.default_rng(position).uniform(-0.15, 0.15, size=len(delta))
        axes.scatter(delta.to_numpy(), position + jitter, s=6, alpha=0.5)
        axes.plot([delta.mean()] * 2, [position - 0.3, position + 0.3], color="black")
        labels.append(
            # Ranked models all have a cluster; the column is a float where others have none.
            f"{record['model']}\np = {record['p_vs_best']:.3g}, cluster {int(record['cluster'])}"
        )
    axes.axvline(0, color="grey", linewidth=0.8)
    axes.set_yticks(range(len(labels)), labels, fontsize=8)
    axes.set_ylim(len(labels) - 0.5, -0.5)
    how = better(primary, lower, board.attrs.get("targets"))
    axes.set_xlabel(f"{primary}: model minus {best}, per direction ({how})")
    axes.set_title(f"Paired comparison with the best model, {best}")
    axes.grid(axis="x", alpha=0.3)
    return figure


def timing_per_direction(timing: pd.DataFrame, gpus: int) -> pd.DataFrame:
    """sentences/s, output tokens/s and GPU-seconds for each direction of one model."""
    table = pd.DataFrame(index=timing.index)
    table["sentences/s"] = timing.get("sentences_per_second")
    table["output tokens/s"] = timing.get("output_tokens_per_second")
    table["GPU-seconds"] = timing["seconds"] * gpus if "seconds" in timing else np.nan
    return table


TIMING_PANELS = ("sentences/s", "output tokens/s", "GPU-seconds")


def _recorded(values: pd.Series, panel: str) -> np.ndarray:
    """The finite values of a panel; GPU-seconds of a model that used no GPU are not data."""
    finite = finite_values(values)
    return finite[finite > 0] if panel == "GPU-seconds" else finite


def timing_figure(timing_by_model: Mapping[str, pd.DataFrame], gpus: Mapping[str, int]) -> Figure:
    """Box plots per model of the three rates, one panel each; a rate no model recorded (no
    token counts, no GPU used) gets no panel."""
    tables = {name: timing_per_direction(t, gpus[name]) for name, t in timing_by_model.items()}
    names = list(tables)
    panels = [
        panel
        for panel in TIMING_PANELS
        if any(_recorded(tables[name][panel], panel).size for name in names)
    ] or list(TIMING_PANELS[:1])
    figure = _figure(3.7 * len(panels), max(2.5, 0.45 * len(names) + 1.5))
    for number, panel in enumerate(panels, start=1):
        axes = figure.add_subplot(1, len(panels), number)
        values = [_recorded(tables[name][panel], panel) for name in names]
        shown = [(i, v) for i, v in enumerate(values) if v.size]
        if shown:
            axes.boxplot(
                [v for _, v in shown],
                positions=[i for i, _ in shown],
                orientation="horizontal",
                widths=0.5,
            )
        for i, v in enumerate(values):
            if not v.size:
                axes.text(
                    0.02,
                    i,
                    "not recorded",
                    va="center",
                    fontsize=7,
                    color="grey",
                    transform=axes.get_yaxis_transform(),
                )
        axes.set_yticks(range(len(names)), names if number == 1 else [""] * len(names))
        axes.set_ylim(len(names) - 0.5, -0.5)
        axes.set_xlabel(f"{panel} per direction")
        axes.grid(axis="x", alpha=0.3)
    figure.suptitle("Translation speed per direction")
    return figure


def forest_plot(board: pd.DataFrame, lower: set[str]) -> Figure:
    """Each model's primary metric with its 95% interval, in leaderboard order."""
    primary = board.attrs["primary"]
    figure = _figure(7.5, max(2.0, 0.4 * len(board) + 1.2))
    axes = figure.add_subplot()
    positions = np.arange(len(board))
    means = board[primary].to_numpy(dtype=float)
    errors = np.abs(
        np.vstack([means - board[f"{primary}_ci_low"], board[f"{primary}_ci_high"] - means])
    )
    axes.errorbar(means, positions, xerr=errors, fmt="o", capsize=3)
    axes.set_yticks(positions, board["model"])
    axes.set_ylim(len(board) - 0.5, -0.5)
    how = better(primary, lower, board.attrs.get("targets"))
    axes.set_xlabel(f"{primary}, macro mean with 95% interval ({how})")
    axes.grid(axis="x", alpha=0.3)
    return figure


def write_heatmaps(
    paths: Mapping[str, Path],
    scores: pd.DataFrame,
    model: str,
    lower: set[str],
    targets: Mapping[str, float] | None = None,
) -> None:
    """One model's heatmaps, one per metric column at its path in `paths`: they need its
    scores alone, so each model's are drawn by its own job, and adding a model draws only its
    own."""
    for column, path in paths.items():
        write_text(path, heatmap(scores, column, model, lower, targets))
