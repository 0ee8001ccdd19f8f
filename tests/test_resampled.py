"""The statistics read from each model's stored resamples are those made from its rows.

The reference is the former way, kept here: every interval resampled from the rows, every
paired test made per direction from the two models' merged rows (`stats.paired_samples`, one
vector at a time).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bouquet_eval.core.stats import (
    Resampling,
    approximate_randomization_p,
    benjamini_hochberg,
    macro_bootstrap_interval,
    paired_bootstrap_p,
    paired_samples,
    pool,
)
from bouquet_eval.results.aggregate import GROUP_COLUMNS, direction_table
from bouquet_eval.results.compare import compare_models, versus_baseline
from bouquet_eval.results.leaderboard import SENTENCE_KEY, ModelResults, build_leaderboard
from bouquet_eval.results.resampled import ResampledScores, StoredResamples, paired_bootstrap

RESAMPLING = Resampling(seed=5, bootstrap_resamples=300, ar_trials=500)
DIRECTIONS = [
    ("eng_Latn", "fra_Latn"),
    ("fra_Latn", "eng_Latn"),
    ("eng_Latn", "deu_Latn"),
    ("deu_Latn", "eng_Latn"),
    ("fra_Latn", "deu_Latn"),
]
COLUMNS = ["chrfpp", "metricx", "glotlid_score"]


def model_rows(shift: float, seed: int, sentences: int = 60) -> pd.DataFrame:
    """chrF++ and MetricX everywhere; a GlotLID score missing for the same sentences in every
    model (a language it has no label for) and, in the last direction, for others too."""
    rng = np.random.default_rng(seed)
    base = np.random.default_rng(0).uniform(20, 80, size=sentences)
    frames = []
    for offset, (src, tgt) in enumerate(DIRECTIONS):
        chrf = base + 4 * offset + shift + rng.normal(0, 6, size=sentences)
        glotlid = rng.uniform(0, 1, size=sentences)
        glotlid[:5] = np.nan
        if offset == len(DIRECTIONS) - 1:
            glotlid[rng.random(sentences) < 0.2] = np.nan
        frames.append(
            pd.DataFrame(
                {
                    "src_lang": src,
                    "tgt_lang": tgt,
                    "uniq_id": [f"s{i}" for i in range(sentences)],
                    "chrfpp": chrf,
                    "metricx": 25 - chrf / 4 + rng.normal(0, 1, size=sentences),
                    "glotlid_score": glotlid,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def stored(name: str, rows: pd.DataFrame, folder: Path) -> ModelResults:
    """A model as the leaderboard job reads it: its resamples through resampled.npz."""
    table = direction_table(rows, COLUMNS, RESAMPLING)
    table.resampled.write(folder / f"{name}.npz")
    resampled = ResampledScores.read(folder / f"{name}.npz", RESAMPLING.signature())
    return ModelResults(name, table.scores, rows, resampled)


def reference_p(baseline: pd.DataFrame, system: pd.DataFrame, column: str) -> float:
    merged = baseline[[*SENTENCE_KEY, column]].merge(
        system[[*SENTENCE_KEY, column]], on=SENTENCE_KEY, suffixes=("_a", "_b")
    )
    return paired_bootstrap_p(
        pool(
            [
                paired_samples(group[f"{column}_a"], group[f"{column}_b"], RESAMPLING)
                for _, group in merged.groupby(GROUP_COLUMNS, sort=True)
            ]
        )
    )


def reference_interval(rows: pd.DataFrame, column: str) -> tuple[float, float]:
    groups = rows.groupby(GROUP_COLUMNS, sort=True)
    return macro_bootstrap_interval([g[column].to_numpy() for _, g in groups], RESAMPLING)


def reference_comparison(
    base: pd.DataFrame, rows: pd.DataFrame, column: str
) -> list[tuple[float, float, float, float]]:
    """Per direction, then pooled: delta, the two p-values, and the pooled row last."""
    merged = base[[*SENTENCE_KEY, column]].merge(
        rows[[*SENTENCE_KEY, column]], on=SENTENCE_KEY, suffixes=("_a", "_b")
    )
    samples = [
        paired_samples(group[f"{column}_a"], group[f"{column}_b"], RESAMPLING)
        for _, group in merged.groupby(GROUP_COLUMNS, sort=True)
    ]
    return [
        (s.n_sentences, s.delta, paired_bootstrap_p(s), approximate_randomization_p(s))
        for s in [*samples, pool(samples)]
    ]


@pytest.fixture
def models(tmp_path: Path) -> list[ModelResults]:
    rows = {
        "best": model_rows(0, 1),
        "tied": model_rows(-0.3, 2),
        "worse": model_rows(-3, 3),
        "worst": model_rows(-9, 4),
    }
    # One model lists its sentences in another order: it pairs through its rows.
    rows["worse"] = rows["worse"].sample(frac=1.0, random_state=0).reset_index(drop=True)
    return [stored(name, frame, tmp_path) for name, frame in rows.items()]


def test_stored_resamples_round_trip_and_name_their_statistics(
    models: list[ModelResults], tmp_path: Path
) -> None:
    written = direction_table(models[0].rows, COLUMNS, RESAMPLING).resampled
    read = models[0].resampled
    assert read is not None and read.directions == written.directions
    for column in COLUMNS:
        assert np.array_equal(read.resamples[column], written.resamples[column])
        assert np.array_equal(read.means[column], written.means[column], equal_nan=True)
    with pytest.raises(ValueError, match=r"best.npz: resampled with 'ci:95\|bs:300"):
        ResampledScores.read(tmp_path / "best.npz", Resampling().signature())


def test_a_leaderboard_reads_the_resamples_of_its_primary_metric_alone(
    models: list[ModelResults],
) -> None:
    """Its intervals come from each column's macro resamples, kept in the file."""
    comparable = [m for m in models if m.name != "worse"]  # the others pair through resamples
    board = build_leaderboard(comparable, COLUMNS, {"metricx"}, RESAMPLING)
    assert board.attrs["primary"] == "metricx"
    for model in comparable:
        assert model.resampled is not None
        assert isinstance(model.resampled.resamples, StoredResamples)
        assert list(model.resampled.resamples.read) == ["metricx"], model.name
        # Asking which columns it holds reads none.
        assert "chrfpp" in model.resampled.resamples
        assert "bleu" not in model.resampled.resamples
        assert list(model.resampled.resamples.read) == ["metricx"], model.name


def test_resamples_read_after_their_file_was_written_again_are_refused(
    models: list[ModelResults], tmp_path: Path
) -> None:
    """A column is read when first asked for: from the file whose statistics were checked."""
    resampled = ResampledScores.read(tmp_path / "best.npz", RESAMPLING.signature())
    os.replace(tmp_path / "worst.npz", tmp_path / "best.npz")
    with pytest.raises(RuntimeError, match=r"best.npz was written again while it was being read"):
        resampled.resamples["chrfpp"]


def test_a_file_without_macro_resamples_gives_the_same_intervals(
    models: list[ModelResults], tmp_path: Path
) -> None:
    """As resampled.npz was written before it kept them."""
    with np.load(tmp_path / "best.npz") as stored:
        arrays = {key: stored[key] for key in stored.files if not key.startswith("macro:")}
    np.savez(tmp_path / "older.npz", **arrays)
    older = ResampledScores.read(tmp_path / "older.npz", RESAMPLING.signature())
    assert not older.macro
    assert models[0].resampled is not None
    for column in COLUMNS:
        expected = reference_interval(models[0].rows, column)
        assert older.interval(column) == models[0].resampled.interval(column) == expected


@pytest.mark.parametrize("column", COLUMNS)
def test_leaderboard_numbers_are_those_from_the_rows(
    models: list[ModelResults], column: str
) -> None:
    lower = {"metricx"} if column == "metricx" else set()
    board = build_leaderboard(models, [column], lower, RESAMPLING)
    by_name = {m.name: m for m in models}
    for record in board.to_dict(orient="records"):
        rows = by_name[record["model"]].rows
        expected = reference_interval(rows, column)
        assert (record[f"{column}_ci_low"], record[f"{column}_ci_high"]) == expected
    ranked = board["model"].tolist()
    best = by_name[ranked[0]].rows
    expected_p = [reference_p(best, by_name[name].rows, column) for name in ranked[1:]]
    assert board["p_vs_best"].tolist()[1:] == expected_p
    assert board["cluster"].tolist()[0] == 1


def test_paired_resamples_are_the_paired_test_of_the_rows(models: list[ModelResults]) -> None:
    best, tied = models[0], models[1]
    assert best.resampled is not None and tied.resampled is not None
    for column in COLUMNS:
        expected = reference_comparison(best.rows, tied.rows, column)
        if column == "glotlid_score":  # missing for other sentences in one direction
            assert not best.resampled.pairs_with(tied.resampled, column)
            continue
        paired = paired_bootstrap(best.resampled, tied.resampled, column)
        assert paired.delta.tolist() == [delta for _, delta, _, _ in expected[:-1]]
        assert paired.p_values.tolist() == [p for _, _, p, _ in expected[:-1]]
        assert (paired.pooled_delta, paired.pooled_p) == expected[-1][1:3]
    # The sentences in another order: the resamples do not pair, the rows do.
    assert models[2].resampled is not None
    assert not best.resampled.pairs_with(models[2].resampled, "chrfpp")


def test_comparison_is_the_one_made_direction_by_direction(models: list[ModelResults]) -> None:
    rows = {m.name: m.rows for m in models}
    comparison = compare_models(rows, "best", COLUMNS, RESAMPLING)
    for (system, metric), found in comparison.groupby(["system", "metric"], sort=False):
        expected = reference_comparison(rows["best"], rows[str(system)], str(metric))
        columns = ["n_sentences", "delta", "p_paired_bootstrap", "p_approximate_randomization"]
        assert found[columns].to_numpy().tolist() == [list(e) for e in expected]


def test_the_report_compares_with_the_baseline_as_compare_does(
    models: list[ModelResults],
) -> None:
    board = build_leaderboard(models, ["chrfpp"], set(), RESAMPLING)
    rows = {m.name: m.rows for m in models}
    statistics = {m.name: m.statistics(["chrfpp"], RESAMPLING) for m in models}
    versus = versus_baseline(board, rows, statistics, "tied", RESAMPLING)
    assert versus is not None
    expected = compare_models(rows, "tied", ["chrfpp"], RESAMPLING)
    expected = expected[expected["src_lang"] != "all"]
    columns = ["system", "src_lang", "tgt_lang", "delta", "p_paired_bootstrap"]
    found = versus.sort_values(["system", "src_lang", "tgt_lang"])[columns]
    expected = expected.sort_values(["system", "src_lang", "tgt_lang"])
    assert found.to_numpy().tolist() == expected[columns].to_numpy().tolist()
    for system, group in versus.groupby("system"):
        corrected = benjamini_hochberg(group["p_paired_bootstrap"].to_numpy())
        assert group["p_paired_bootstrap_bh"].tolist() == corrected.tolist(), system
