"""Each model's report extract: the pages made from the extracts are those made from the rows,
and an extract whose model's scores changed is not used."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bouquet_eval.core.stats import Resampling
from bouquet_eval.results.aggregate import direction_table
from bouquet_eval.results.extracts import (
    EXTRACT_FILE,
    ReportExtract,
    from_extracts,
    model_extract,
)
from bouquet_eval.results.leaderboard import build_leaderboard, read_results
from bouquet_eval.results.report import RunRecords, figure_paths, write_figures
from bouquet_eval.results.resampled import RESAMPLED_FILE

from .synthetic import bouquet_shaped_directions

COLUMNS = ["chrfpp", "metricx"]
LOWER = {"metricx"}
RESAMPLING = Resampling(bootstrap_resamples=200)
DIRECTIONS = bouquet_shaped_directions(languages=12, total=30)
SENTENCES = 9


def model_rows(shift: float, seed: int) -> pd.DataFrame:
    """Scores with ties (MetricX rounded) and missing ones (a chrF++ and a MetricX score in
    some directions), texts of every length, an output missing."""
    rng = np.random.default_rng(seed)
    frames = []
    for number, direction in enumerate(DIRECTIONS):
        chrf = np.clip(50 + shift + rng.normal(0, 20, size=SENTENCES), 0, 100)
        metricx = np.round(25 - chrf / 4, 0)
        if number % 4 == 0:
            chrf[number % SENTENCES] = np.nan
            metricx[(number + 2) % SENTENCES] = np.nan
        ids = [f"s{i}" for i in range(SENTENCES)]
        frames.append(
            pd.DataFrame(
                {
                    "src_lang": direction.src_lang,
                    "tgt_lang": direction.tgt_lang,
                    "src_text": [f"s{i} source {'é' * i}" for i in range(SENTENCES)],
                    "ref_text": [f"{i} reference" for i in ids],
                    "mt_text": [
                        f"{i} output {seed} {'x' * int(np.nan_to_num(c))}"
                        for i, c in zip(ids, chrf, strict=True)
                    ],
                    "uniq_id": ids,
                    "chrfpp": chrf,
                    "metricx": metricx,
                }
            )
        )
    rows = pd.concat(frames, ignore_index=True)
    rows.loc[3, "mt_text"] = None
    return rows


def write_model(folder: Path, rows: pd.DataFrame) -> None:
    """scored_rows.parquet, scores.csv and resampled.npz as aggregation writes them, and the
    model's report extract."""
    folder.mkdir(parents=True, exist_ok=True)
    rows.to_parquet(folder / "scored_rows.parquet", index=False, row_group_size=50)
    table = direction_table(rows, COLUMNS, RESAMPLING)
    table.scores.to_csv(folder / "scores.csv", index=False)
    table.resampled.write(folder / RESAMPLED_FILE)
    model_extract(folder / "scored_rows.parquet", COLUMNS, LOWER).write(folder / EXTRACT_FILE)


def pages(output: Path, models: list[str], folder: Path, extracts: bool) -> dict[str, bytes]:
    """Every page and figure of the leaderboard job, by path: from the extracts, or from the
    rows as without them."""
    files = [
        (output / m / "scores.csv", output / m / "scored_rows.parquet", output / m / RESAMPLED_FILE)
        for m in models
    ]
    results = read_results(models, files, COLUMNS, RESAMPLING)
    board = build_leaderboard(results, COLUMNS, LOWER, RESAMPLING)
    timing = pd.DataFrame({"seconds": [2.0, 3.0], "sentences_per_second": [4.0, 5.0]})
    run = RunRecords(
        timing={m: timing for m in models},
        gpus={m: 0 for m in models},
        config={},
        manifests={m: {"entries": []} for m in models},
    )
    paths = figure_paths(folder, models, COLUMNS, [str(d) for d in DIRECTIONS])
    rows = {m: output / m / "scored_rows.parquet" for m in models}
    chosen = {m: output / m / EXTRACT_FILE for m in models} if extracts else None
    write_figures(paths, board, results, rows, run, LOWER, RESAMPLING, models[-1], chosen)
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


MODELS = ["alpha", "bravo", "charlie", "delta"]


@pytest.fixture
def output(tmp_path: Path) -> Path:
    for number, model in enumerate(MODELS):
        write_model(tmp_path / "runs" / model, model_rows(-4.0 * number, number))
    return tmp_path / "runs"


def read_extracts(output: Path, models: list[str]) -> dict[str, ReportExtract]:
    return {m: ReportExtract.read(output / m / EXTRACT_FILE) for m in models}


def test_pages_from_the_extracts_are_those_from_the_rows(output: Path, tmp_path: Path) -> None:
    extracts = read_extracts(output, MODELS)
    rows = {m: output / m / "scored_rows.parquet" for m in MODELS}
    assert from_extracts(extracts, rows, MODELS, COLUMNS, "metricx", True) is not None
    from_rows = pages(output, MODELS, tmp_path / "rows", extracts=False)
    assert any(name.startswith("sentences") for name in from_rows)
    assert pages(output, MODELS, tmp_path / "extracts", extracts=True) == from_rows


def test_an_extract_round_trips(output: Path) -> None:
    made = model_extract(output / "alpha" / "scored_rows.parquet", COLUMNS, LOWER)
    read = ReportExtract.read(output / "alpha" / EXTRACT_FILE)
    assert (read.sentences, read.columns, read.lower, read.values) == (
        made.sentences,
        made.columns,
        made.lower,
        made.values,
    )
    assert (read.worst, read.sample) == (made.worst, made.sample)
    pd.testing.assert_frame_equal(read.rows, made.rows)
    for column in COLUMNS:
        made_violin, read_violin = made.violins[column], read.violins[column]
        assert made_violin is not None and read_violin is not None
        assert read_violin.keys() == made_violin.keys()
        for key, value in made_violin.items():
            np.testing.assert_array_equal(read_violin[key], value)
    # The worst MetricX sentences of a direction are its highest, ties in the rows' order.
    first = made.rows.loc[made.worst["metricx"][:3]]
    assert first["metricx"].is_monotonic_decreasing


def test_changed_scores_leave_the_extract_unused(
    output: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A model rescored after its extract was made (the workflow remakes it; here it is not):
    its pages come from its rows, the same as they would without extracts."""
    stale = output / "bravo" / EXTRACT_FILE
    kept = stale.read_bytes()
    rows = model_rows(-4.0, 1)
    rows.loc[rows["metricx"].notna().idxmax(), "metricx"] += 3
    write_model(output / "bravo", rows)
    stale.write_bytes(kept)
    extracts = read_extracts(output, MODELS)
    scored = {m: output / m / "scored_rows.parquet" for m in MODELS}
    with caplog.at_level(logging.INFO):
        assert from_extracts(extracts, scored, MODELS, COLUMNS, "metricx", True) is None
    assert "bravo's metricx scores are not those of its extract" in caplog.text
    from_rows = pages(output, MODELS, tmp_path / "rows", extracts=False)
    assert pages(output, MODELS, tmp_path / "extracts", extracts=True) == from_rows
    # Made again from the new scores, it serves again.
    write_model(output / "bravo", rows)
    assert from_extracts(read_extracts(output, MODELS), scored, MODELS, COLUMNS, "metricx", True)


def test_sentences_in_another_order_are_read_from_the_rows(
    output: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A model whose sentences are listed in another order, or with other texts, cannot be
    matched by position: the pages come from the rows."""
    shuffled = model_rows(-8.0, 2).sample(frac=1.0, random_state=3).reset_index(drop=True)
    write_model(output / "charlie", shuffled)
    edited = model_rows(-12.0, 3)
    edited.loc[5, "ref_text"] = "another reference"
    write_model(output / "delta", edited)
    scored = {m: output / m / "scored_rows.parquet" for m in MODELS}
    for other in ("charlie", "delta"):
        models = ["alpha", other]
        with caplog.at_level(logging.INFO):
            assert (
                from_extracts(
                    read_extracts(output, models), scored, models, COLUMNS, "metricx", True
                )
                is None
            )
        assert f"{other}'s extract does not serve" in caplog.text
    from_rows = pages(output, MODELS, tmp_path / "rows", extracts=False)
    assert pages(output, MODELS, tmp_path / "extracts", extracts=True) == from_rows


def test_the_aggregation_makes_the_extract_of_the_rows_it_writes(tmp_path: Path) -> None:
    """The extract the aggregate job makes from the rows it writes is `model_extract` of the
    file it writes, to the bit: ties, missing scores and texts, directions of every size."""
    from bouquet_eval.metrics import load_metrics
    from bouquet_eval.results.aggregate import write_aggregates
    from bouquet_eval.results.extracts import ExtractBuilder

    rows = model_rows(0.0, seed=4)
    rows = rows.drop(index=rows.index[(rows["tgt_lang"] == DIRECTIONS[5].tgt_lang)][:4])
    scored = []
    for (src, tgt), part in rows.groupby(["src_lang", "tgt_lang"], sort=False):
        scored.append(tmp_path / f"{src}-{tgt}.scored.parquet")
        part.to_parquet(scored[-1], index=False)
    outputs = {name: tmp_path / name for name in ("scores", "summary", "scored_rows", "resampled")}
    made: list[ExtractBuilder] = []

    def builder(count: int, names: Sequence[str]) -> ExtractBuilder:
        made.append(ExtractBuilder(count, names, COLUMNS, LOWER))
        return made[0]

    metrics = load_metrics(["metricx"], {})  # no corpus score: one output is missing
    write_aggregates(scored, metrics, RESAMPLING, outputs, reader=builder)
    streamed, read = made[0].extract(), model_extract(outputs["scored_rows"], COLUMNS, LOWER)
    streamed.write(tmp_path / "streamed.parquet")
    read.write(tmp_path / "read.parquet")
    assert (tmp_path / "streamed.parquet").read_bytes() == (tmp_path / "read.parquet").read_bytes()


def test_violins_are_matplotlibs_own_statistics() -> None:
    """`violin_of`, which imports no matplotlib, gives what matplotlib's `violin_stats` gives
    with the same density, number for number."""
    from matplotlib import cbook

    from bouquet_eval.results.extracts import binned_density, finite_values, violin_of

    rng = np.random.default_rng(0)
    values = pd.Series(np.r_[rng.normal(50, 15, 5000), [np.nan, np.inf, -np.inf, 7.0]])
    ours = violin_of(values)
    (theirs,) = cbook.violin_stats([finite_values(values)], binned_density)
    assert ours is not None and sorted(ours) == sorted(theirs)
    for key, value in theirs.items():
        assert np.array_equal(np.asarray(ours[key]), np.asarray(value)), key
    assert violin_of(pd.Series([np.nan])) is None
