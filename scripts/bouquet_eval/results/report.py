"""Figures and pages of the Snakemake report (`snakemake --report report.html`).

Figures are SVG (matplotlib's; each model's heatmaps written directly, `results.heatmaps`):
vector graphics stay sharp at any zoom, which the heatmap of BOUQuET's ~1000 directions needs,
their text stays text (searchable), and they need no JavaScript, so they render offline and
identically in any browser or image viewer. Pages
(the leaderboard, the run's configuration) are plain HTML with the figures inline.
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bouquet_eval.core.io import write_atomically
from bouquet_eval.core.stats import Resampling, benjamini_hochberg
from bouquet_eval.metrics.records import builtin_ranges
from bouquet_eval.results.aggregate import ENGLISH, GROUP_COLUMNS
from bouquet_eval.results.compare import POOLED, compare_models
from bouquet_eval.results.extracts import ReportExtract, finite_values, from_extracts, violin_of
from bouquet_eval.results.heatmaps import Heatmap, heatmap_svg
from bouquet_eval.results.leaderboard import (
    ENGLISH_GROUPS,
    MISSING,
    SIGNIFICANCE_LEVEL,
    ModelResults,
    display_scales,
    format_score,
    metric_columns_of,
    unseen_notes,
)
from bouquet_eval.results.resampled import ResampledScores, paired_bootstrap
from bouquet_eval.results.views import (
    WORST_SENTENCES,
    results_data,
    results_page,
    sentence_parts,
    sentences_data,
    sentences_pages,
    worst_sentences,
)

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


def write_text(path: Path, text: str) -> None:
    def write(temporary: Path) -> None:
        temporary.write_text(text, encoding="utf-8")

    write_atomically(path, write)


def write_svg(path: Path, figure: Figure) -> None:
    write_text(path, svg_text(figure))


def better(column: str, lower: set[str]) -> str:
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


def heatmap(scores: pd.DataFrame, column: str, model: str, lower: set[str]) -> str:
    """Source x target matrix of a model's direction means on one metric, among the
    `HEATMAP_LANGUAGES` languages most paired with each other (`dense_languages`), as SVG
    (`results.heatmaps`: drawn directly, not through matplotlib)."""
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
    title = [f"{model}: {column} per direction ({better(column, lower)})"]
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
    )
    return heatmap_svg(drawn, lambda value: format_score(value, scale))


def distributions(
    violins: Mapping[str, dict[str, Any] | None], column: str, lower: set[str]
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
    axes.set_xlabel(f"{column} per sentence ({better(column, lower)})")
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
            f"{record['model']}\np = {record['p_vs_best']:.3g}, cluster {record['cluster']}"
        )
    axes.axvline(0, color="grey", linewidth=0.8)
    axes.set_yticks(range(len(labels)), labels, fontsize=8)
    axes.set_ylim(len(labels) - 0.5, -0.5)
    axes.set_xlabel(f"{primary}: model minus {best}, per direction ({better(primary, lower)})")
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
    axes.set_xlabel(f"{primary}, macro mean with 95% interval ({better(primary, lower)})")
    axes.grid(axis="x", alpha=0.3)
    return figure


# --- HTML pages -----------------------------------------------------------------------------

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1em; color: #1f2328; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #d0d7de; padding: 0.25em 0.45em; text-align: right; }
th { max-width: 9em; white-space: normal; overflow-wrap: break-word; }
td.name { min-width: 10em; max-width: 16em; overflow-wrap: anywhere; }
td .interval { white-space: nowrap; }
.wide { max-width: 100%; overflow-x: auto; }
svg { max-width: 100%; height: auto; }
th { background: #f6f8fa; }
td.name, th.name { text-align: left; }
tr.cluster-1 td { background: #e6f4ea; }
tr.unranked td { color: #6e7781; font-style: italic; }
.interval { color: #57606a; font-size: 0.85em; }
pre { background: #f6f8fa; padding: 1em; overflow: auto; font-size: 0.85em; }
"""


def page(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )


def inline_svg(figure: Figure) -> str:
    text = svg_text(figure)
    return text[text.index("<svg") :]


def leaderboard_page(board: pd.DataFrame, lower: set[str]) -> str:
    """The leaderboard as an HTML table (mean and interval per metric) and a forest plot."""
    primary = board.attrs["primary"]
    metrics = metric_columns_of(board)
    scale = display_scales(board)
    head = ["rank", "model", "cluster", "p vs best", "directions", "sentences"]
    head += [f"{c} {'↓' if c in lower else '↑'}" for c in metrics]
    # The metric is named in the notes: the headers stay narrow.
    head += [f"{g.replace('_', ' ').replace('english', 'English')}" for g in ENGLISH_GROUPS]
    rows = []
    for record in board.to_dict(orient="records"):
        ranked = not pd.isna(record["rank"])
        bound = record.get("bound") or ""
        css = "unranked" if not ranked else f"cluster-{record['cluster']}"
        rank = f"{bound} bound" if bound else MISSING if not ranked else str(record["rank"])
        cells = [
            _cell(rank),
            _cell(record["model"], "name"),
            _cell(MISSING if pd.isna(record["cluster"]) else str(record["cluster"])),
            _cell(MISSING if pd.isna(record["p_vs_best"]) else f"{record['p_vs_best']:.3g}"),
            _cell(str(record["n_directions"])),
            _cell(str(record["n_sentences"])),
        ]
        for c in metrics:
            interval = (
                f"{format_score(record[f'{c}_ci_low'], scale[c])}{MISSING}"
                f"{format_score(record[f'{c}_ci_high'], scale[c])}"
            )
            cells.append(
                f"<td>{format_score(record[c], scale[c])}<br>"
                f'<span class="interval">[{interval}]</span></td>'
            )
        cells += [
            _cell(format_score(record[f"{primary}_{g}"], scale[primary])) for g in ENGLISH_GROUPS
        ]
        rows.append(f'<tr class="{css}">{"".join(cells)}</tr>')
    header = "".join(
        f'<th class="{"name" if h == "model" else ""}">{html.escape(h)}</th>' for h in head
    )
    notes = [
        f"Ranked by <b>{html.escape(primary)}</b> ({better(primary, lower)}): the macro mean over "
        "directions, with its 95% bootstrap interval (sentences resampled within directions).",
        f"Green rows (cluster 1) are not significantly different from the best model (paired "
        f"bootstrap on {html.escape(primary)}, p ≥ {SIGNIFICANCE_LEVEL}).",
        f"The last three columns are {html.escape(primary)} over the directions into English, "
        "out of English and between two other languages.",
    ]
    notes += [
        f"{html.escape(r['model'])}: {html.escape(r['note'])}."
        for r in board.to_dict(orient="records")
        if r["note"]
    ]
    # Each metric's pooled agreement with human judgements, where they were evaluated.
    notes += [
        f"Agreement with people: {html.escape(note)}." for note in board.attrs.get("agreement", ())
    ]
    notes += [f"{html.escape(note)}." for note in unseen_notes(board)]
    body = (
        f'<div class="wide"><table id="leaderboard"><thead><tr>{header}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>\n"
        + "".join(f"<p>{note}</p>" for note in notes)
        + f"<h2>{html.escape(primary)} with 95% intervals</h2>"
        + inline_svg(forest_plot(board, lower))
    )
    return page("Leaderboard", body)


def _cell(text: str, css: str = "") -> str:
    return f'<td class="{css}">{html.escape(text)}</td>'


def dataset_in_use(dataset: Mapping[str, Any]) -> dict[str, Any]:
    """The `dataset` settings the run used: a local `path` replaces the Hub's name, config,
    split and revision, which the configuration still holds as defaults but nothing read."""
    if dataset.get("path"):
        return {"path": dataset["path"]}
    return {key: value for key, value in dataset.items() if key != "path"}


def run_page(config: dict[str, Any], manifests: Mapping[str, dict[str, Any]]) -> str:
    """The configuration of the run and each model's latest manifest entry, in full."""
    import yaml

    shown = {**config, "dataset": dataset_in_use(config.get("dataset") or {})}
    sections = [
        "<h2>Configuration</h2>",
        f"<pre>{html.escape(yaml.safe_dump(shown, sort_keys=False, allow_unicode=True))}</pre>",
    ]
    for name, manifest in manifests.items():
        entries = manifest.get("entries", [])
        latest = entries[-1] if entries else {}
        command = " ".join(latest.get("command") or [])
        sections += [
            f"<h2>Manifest of {html.escape(name)}</h2>",
            f"<p>{len(entries)} entries; the latest, of {html.escape(str(latest.get('created')))},"
            f" from the command <code>{html.escape(command)}</code>:</p>",
            usage_line(latest.get("timing") or {}),
            f"<pre>{html.escape(json.dumps(latest, indent=2, ensure_ascii=False))}</pre>",
        ]
    return page("Run configuration and manifests", "\n".join(sections))


def usage_line(timing: Mapping[str, Any]) -> str:
    """The tokens a model's translations took, and their cost where prices are given."""
    names = {
        "prompt_tokens": "prompt tokens",
        "completion_tokens": "completion tokens",
        "reasoning_tokens": "of which reasoning",
        "cost": "cost",
    }
    parts = [f"{label} {timing[key]:,.6g}" for key, label in names.items() if key in timing]
    return f"<p>{html.escape('; '.join(parts))}.</p>" if parts else ""


def heatmap_path(folder: Path, model: str, column: str) -> Path:
    return folder / "heatmaps" / f"{model}.{column}.svg"


def write_heatmaps(
    paths: Mapping[str, Path], scores: pd.DataFrame, model: str, lower: set[str]
) -> None:
    """One model's heatmaps, one per metric column at its path in `paths`: they need its
    scores alone, so each model's are drawn by its own job, and adding a model draws only its
    own."""
    for column, path in paths.items():
        write_text(path, heatmap(scores, column, model, lower))


def figure_paths(
    folder: Path, models: Sequence[str], columns: Sequence[str], directions: Sequence[str]
) -> dict[str, Any]:
    """Where each figure goes; the workflow declares the same paths as outputs. The sentences
    of the run's `directions` take one page per `views.SentencePart`."""
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
    """Every figure and page at its place in `paths` (see `figure_paths`) but the models'
    heatmaps (`write_heatmaps`); `scored_rows` are the models' scored_rows.parquet (the
    sentence page's texts), `baseline` the model the results page compares the others with
    (by default the best ranked one), `extracts` the models' report_extract.parquet, whence
    the distributions and the sentence pages are made where they serve
    (`extracts.from_extracts`), else from the models' rows."""
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
        scores, ordered, columns, lower, primary, versus, board.attrs.get("decimals", {})
    )
    write_text(paths["results"], results_page(data, STYLE))
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
    for part, text in zip(parts, sentences_pages(sentences, parts, STYLE), strict=True):
        write_text(paths["sentences"][part], text)
    for column, path in paths["distributions"].items():
        write_svg(path, distributions(violins[column], column, lower))
    write_svg(paths["comparison"], comparison(scores, board, lower))
    write_svg(paths["timing"], timing_figure({m: run.timing[m] for m in ordered}, run.gpus))
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


def versus_baseline(
    board: pd.DataFrame,
    rows: Mapping[str, pd.DataFrame],
    statistics: Mapping[str, ResampledScores],
    baseline: str | None,
    resampling: Resampling,
) -> pd.DataFrame | None:
    """Paired bootstrap tests of every ranked model against `baseline` on the primary metric,
    per direction, with Benjamini-Hochberg corrected p-values (the columns of
    `compare.compare_models`); None when fewer than two models are comparable.

    They are the differences of the models' resamples (`resampled.paired_bootstrap`), or,
    for a model that did not score the baseline's sentences in its order, from the rows."""
    ranked = board.loc[board["rank"].notna(), "model"].tolist()
    if baseline is None or baseline not in ranked:
        baseline = ranked[0] if ranked else None
    if baseline is None or len(ranked) < 2:
        return None
    primary = board.attrs["primary"]
    base = statistics[baseline]
    frames = []
    for system in ranked:
        if system == baseline:
            continue
        if not base.pairs_with(statistics[system], primary):
            pair = {baseline: rows[baseline], system: rows[system]}
            compared = compare_models(pair, baseline, [primary], resampling)
            frames.append(compared[compared["src_lang"] != POOLED])
            continue
        paired = paired_bootstrap(base, statistics[system], primary)
        frames.append(
            pd.DataFrame(
                {
                    "metric": primary,
                    "baseline": baseline,
                    "system": system,
                    "src_lang": [src for src, _ in base.directions],
                    "tgt_lang": [tgt for _, tgt in base.directions],
                    "delta": paired.delta,
                    "p_paired_bootstrap": paired.p_values,
                    "p_paired_bootstrap_bh": benjamini_hochberg(paired.p_values),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)
