"""The report's figures, as SVG written directly: each model's heatmaps (`results.heatmaps`)
and the charts of models against a value (`results.svgplot`).

Vector graphics stay sharp at any zoom, which the heatmap of BOUQuET's ~1000 directions needs,
their text stays text (searchable), and they need no JavaScript, so they render offline and
identically in any browser or image viewer.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bouquet_eval.core.io import write_text
from bouquet_eval.metrics.records import builtin_ranges
from bouquet_eval.results.aggregate import ENGLISH, GROUP_COLUMNS
from bouquet_eval.results.extracts import finite_values
from bouquet_eval.results.heatmaps import Heatmap, heatmap_svg
from bouquet_eval.results.leaderboard import display_scales, format_score
from bouquet_eval.results.svgplot import (
    CYCLE,
    Box,
    BoxStats,
    Chart,
    Interval,
    MeanDiamond,
    RowNote,
    Strip,
    Violin,
)

# Below this many languages, every heatmap cell carries its value as text (and is larger).
ANNOTATED_LANGUAGES = 24
# The heatmap shows at most this many languages (the most paired with each other).
HEATMAP_LANGUAGES = 40


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
) -> str:
    """Violin plots of sentence scores per model (`violin_of`), with the mean marked, as SVG."""
    names = list(violins)
    chart = Chart(names, f"Distribution of sentence scores: {column}", row_height=64)
    panel = chart.panel(f"{column} per sentence ({better(column, lower, targets)})")
    scale = max(
        (abs(float(v[key])) for v in violins.values() if v for key in ("min", "max")), default=0
    )
    for row, name in enumerate(names):
        violin = violins[name]
        if violin is None:
            continue
        summary = ", ".join(
            f"{key} {format_score(float(violin[key]), scale)}"
            for key in ("mean", "median", "min", "max")
        )
        panel.add(Violin(row, violin, f"{name}: {summary}"))
        mean = float(violin["mean"])
        panel.add(MeanDiamond(row, mean, f"{name}: mean {format_score(mean, scale)}"))
        chart.legend = "mean"
    return chart.svg()


def comparison(
    scores_by_model: Mapping[str, pd.DataFrame], board: pd.DataFrame, lower: set[str]
) -> str:
    """Per-direction differences of every ranked model from the best, on the primary metric,
    as SVG."""
    primary = board.attrs["primary"]
    ranked = board[board["rank"].notna()]
    best = ranked["model"].iloc[0] if len(ranked) else None
    others = ranked.iloc[1:]
    title = f"Paired comparison with the best model, {best}"
    if best is None or others.empty:
        return Chart([], title, 70, note="Only one ranked model: nothing to compare.").svg()
    base = scores_by_model[best].set_index(GROUP_COLUMNS)[primary]
    labels = [
        # Ranked models all have a cluster; the column is a float where others have none.
        f"{record['model']}\np = {record['p_vs_best']:.3g}, cluster {int(record['cluster'])}"
        for record in others.to_dict(orient="records")
    ]
    how = better(primary, lower, board.attrs.get("targets"))
    chart = Chart(labels, title, row_height=70, label_size=11)
    panel = chart.panel(f"{primary}: model minus {best}, per direction ({how})")
    panel.zero_line = True
    for position, model in enumerate(others["model"]):
        delta = (scores_by_model[model].set_index(GROUP_COLUMNS)[primary] - base).dropna()
        jitter = np.random.default_rng(position).uniform(-0.15, 0.15, size=len(delta))
        points = delta.to_numpy(dtype=float)
        scale = float(np.abs(points).max(initial=0))
        tips = [
            f"{source} \N{RIGHTWARDS ARROW} {target}: {format_score(value, scale)}"
            for (source, target), value in zip(delta.index, points, strict=True)
        ]
        mean_tip = (
            f"{model}: mean difference {format_score(float(delta.mean()), scale)} over "
            f"{len(delta)} directions"
        )
        colour = CYCLE[position % len(CYCLE)]
        panel.add(Strip(position, points.tolist(), jitter.tolist(), tips, colour, mean_tip))
    return chart.svg()


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


def timing_figure(timing_by_model: Mapping[str, pd.DataFrame], gpus: Mapping[str, int]) -> str:
    """Box plots per model of the three rates, one panel each, as SVG; a rate no model
    recorded (no token counts, no GPU used) gets no panel."""
    tables = {name: timing_per_direction(t, gpus[name]) for name, t in timing_by_model.items()}
    names = list(tables)
    panels = [
        panel
        for panel in TIMING_PANELS
        if any(_recorded(tables[name][panel], panel).size for name in names)
    ] or list(TIMING_PANELS[:1])
    # 3.7 in (355 px) a panel, as before.
    chart = Chart(names, "Translation speed per direction", row_height=55, width=355 * len(panels))
    for rate in panels:
        panel = chart.panel(f"{rate} per direction")
        for row, name in enumerate(names):
            values = _recorded(tables[name][rate], rate)
            if not values.size:
                panel.add(RowNote(row, "not recorded"))
                continue
            stats = BoxStats.of(values)
            tip = (
                f"{name}: {rate} median {stats.median:.4g}, quartiles {stats.q1:.4g} to "
                f"{stats.q3:.4g}, {values.size} directions"
            )
            panel.add(Box(row, stats, tip))
    return chart.svg()


def forest_plot(board: pd.DataFrame, lower: set[str]) -> str:
    """Each model's primary metric with its 95% interval, in leaderboard order, as SVG."""
    primary = board.attrs["primary"]
    how = better(primary, lower, board.attrs.get("targets"))
    chart = Chart(list(board["model"]), "", row_height=48)
    panel = chart.panel(f"{primary}, macro mean with 95% interval ({how})")
    columns = [primary, f"{primary}_ci_low", f"{primary}_ci_high"]
    values = board[columns].to_numpy(dtype=float)
    scale = display_scales(board)[primary]  # as the leaderboard's table writes them
    for row, (name, (mean, low, high)) in enumerate(zip(board["model"], values, strict=True)):
        written = [format_score(float(v), scale) for v in (mean, low, high)]
        tip = f"{name}: {written[0]} [{written[1]}, {written[2]}]"
        panel.add(Interval(row, float(mean), float(low), float(high), tip))
    return chart.svg()


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
