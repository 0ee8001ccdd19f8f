"""The report's files from a run's results: every figure and page of the leaderboard job
(`paths.figure_paths`), drawn by `figures`, rendered by `pages` and `views`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from bouquet_eval.core.io import write_text
from bouquet_eval.core.stats import Resampling
from bouquet_eval.results.compare import versus_baseline
from bouquet_eval.results.extracts import ReportExtract, from_extracts, violin_of
from bouquet_eval.results.figures import comparison, distributions, timing_figure
from bouquet_eval.results.leaderboard import ModelResults
from bouquet_eval.results.pages import leaderboard_page, run_page
from bouquet_eval.results.views import (
    WORST_SENTENCES,
    results_data,
    results_page,
    sentences_data,
    sentences_pages,
    worst_sentences,
)


@dataclass(frozen=True)
class RunRecords:
    """What the report shows of the run beside the scores."""

    timing: Mapping[str, pd.DataFrame]
    gpus: Mapping[str, int]
    config: dict[str, Any]
    manifests: Mapping[str, dict[str, Any]]


def write_figures(
    paths: dict[str, Any],
    board: pd.DataFrame,
    results: Sequence[ModelResults],
    scored_rows: Mapping[str, Path],
    run: RunRecords,
    lower: set[str],
    resampling: Resampling,
    baseline: str | None = None,
    extracts: Mapping[str, Path] | None = None,
) -> None:
    """Every figure and page at its place in `paths` (see `paths.figure_paths`) but the
    models' heatmaps (`figures.write_heatmaps`); `scored_rows` are the models'
    scored_rows.parquet (the sentence page's texts), `baseline` the model the results page
    compares the others with (by default the best ranked one), `extracts` the models'
    report_extract.parquet, whence the distributions and the sentence pages are made where
    they serve (`extracts.from_extracts`), else from the models' rows."""
    scores = {r.name: r.scores for r in results}
    # Models in leaderboard order, best first, in every figure.
    ordered = [name for name in board["model"] if name in scores]
    by_name = {r.name: r for r in results}
    primary = board.attrs["primary"]
    write_text(paths["leaderboard"], leaderboard_page(board, lower))
    columns = list(paths["distributions"])
    statistics = {r.name: r.statistics(columns, resampling) for r in results}
    versus = versus_baseline(board, LazyRows(by_name), statistics, baseline, resampling)
    data = results_data(
        scores,
        ordered,
        columns,
        lower,
        primary,
        versus,
        board.attrs.get("decimals", {}),
        board.attrs.get("targets", {}),
    )
    write_text(paths["results"], results_page(data))
    made = None
    if extracts is not None:
        read = {name: ReportExtract.read(extracts[name]) for name in ordered}
        made = from_extracts(read, scored_rows, ordered, columns, primary, primary in lower)
    if made is None:
        violins, sentence_rows = report_rows(results, ordered, columns, primary, primary in lower)
        sentences = sentences_data(sentence_rows, scored_rows, ordered, primary, primary in lower)
    else:
        violins, sentences = made
    parts = list(paths["sentences"])
    for part, text in zip(parts, sentences_pages(sentences, parts), strict=True):
        write_text(paths["sentences"][part], text)
    for column, path in paths["distributions"].items():
        write_text(path, distributions(violins[column], column, lower, board.attrs.get("targets")))
    write_text(paths["comparison"], comparison(scores, board, lower))
    write_text(paths["timing"], timing_figure({m: run.timing[m] for m in ordered}, run.gpus))
    write_text(paths["run"], run_page(run.config, run.manifests))


class LazyRows(Mapping[str, pd.DataFrame]):
    """Models' sentence scores by name, read when asked for (`ModelResults.rows`)."""

    def __init__(self, results: Mapping[str, ModelResults]) -> None:
        self.results = results

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.results[name].rows

    def __iter__(self) -> Iterator[str]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)


def report_rows(
    results: Sequence[ModelResults],
    ordered: Sequence[str],
    columns: Sequence[str],
    primary: str,
    lower: bool,
) -> tuple[dict[str, dict[str, dict[str, Any] | None]], dict[str, pd.DataFrame]]:
    """What the distributions and the sentence page take of each model's sentence scores,
    each model's read once and let go: per score column its violin (`violin_of`), and its
    rows that can be among its worst on `primary` (`views.worst_sentences` picks the same
    from them as from all rows, in the same order), all of them for the first model (whose
    sample the page shows). Only these stay in memory, not every model's ~900,000 rows."""
    by_name = {r.name: r for r in results}
    violins: dict[str, dict[str, dict[str, Any] | None]] = {c: {} for c in columns}
    sentence_rows: dict[str, pd.DataFrame] = {}
    for position, name in enumerate(ordered):
        rows = by_name[name].rows
        for column in columns:
            if column in rows:
                violins[column][name] = violin_of(rows[column])
        sentence_rows[name] = (
            rows if position == 0 else worst_sentences(rows, primary, lower, WORST_SENTENCES)
        )
    return violins, sentence_rows
