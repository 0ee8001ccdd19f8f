"""Bootstrap intervals, paired tests, summaries and comparisons."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from sacrebleu.metrics import CHRF
from sacrebleu.significance import _compute_p_value, estimate_ci

from bouquet_eval.core.stats import (
    Resampling,
    approximate_randomization_p,
    bootstrap_interval,
    bootstrap_mean_matrix,
    macro_bootstrap_interval,
    paired_bootstrap_p,
    paired_samples,
    paired_samples_of,
    percentile_interval,
    percentile_intervals,
    pool,
    skipna_mean,
)
from bouquet_eval.metrics import CorpusMetric, load_metric
from bouquet_eval.results.aggregate import (
    direction_scores,
    direction_values,
    score_table,
    summary,
)
from bouquet_eval.results.compare import compare_models
from bouquet_eval.scoring.score import score_rows

SMALL = Resampling(seed=7, bootstrap_resamples=400, ar_trials=2000)


def draws(weights_row: np.ndarray) -> np.ndarray:
    """The sentence indices one bootstrap resample drew, from its multiplicities."""
    return np.repeat(np.arange(weights_row.size), weights_row.astype(int))


def test_bootstrap_weights_are_resamples_with_replacement() -> None:
    weights = SMALL.bootstrap_weights(50)
    assert weights.shape == (400, 50)
    assert (weights.sum(axis=1) == 50).all()
    # Each sentence is drawn about once per resample on average.
    assert weights.mean() == pytest.approx(1.0)
    assert 0.3 < (weights == 0).mean() < 0.45  # ~ (1 - 1/n)^n of cells stay empty
    np.testing.assert_array_equal(
        weights, Resampling(seed=7, bootstrap_resamples=400).bootstrap_weights(50)
    )


def test_interval_matches_sacrebleu_definition() -> None:
    rng = np.random.default_rng(0)
    values = rng.normal(50, 10, size=80)
    weights = SMALL.bootstrap_weights(80)
    means = np.array([values[draws(row)].mean() for row in weights])
    low, high = bootstrap_interval(values, SMALL)
    centre, half_width = estimate_ci(means)
    assert (high - low) / 2 == pytest.approx(half_width)
    assert low <= values.mean() <= high
    assert low < centre < high


def test_interval_skips_missing_values() -> None:
    values = np.array([1.0, np.nan, 3.0, 5.0, np.nan, 7.0])
    assert bootstrap_interval(values, SMALL) == bootstrap_interval(values[~np.isnan(values)], SMALL)
    assert np.isnan(bootstrap_interval([np.nan, np.nan], SMALL)).all()


def at_least_as_extreme(statistics: np.ndarray, real: float) -> float:
    """The p-value's definition: trials at least as extreme as the observed difference, + 1."""
    return (np.sum(statistics >= real) + 1) / (len(statistics) + 1)


def test_paired_tests_follow_sacrebleu_but_count_ties() -> None:
    rng = np.random.default_rng(1)
    baseline = rng.uniform(0, 100, size=60)
    system = baseline + rng.normal(1.0, 8.0, size=60)
    samples = paired_samples(baseline, system, SMALL)
    real = abs(system.mean() - baseline.mean())

    # Paired bootstrap, written out resample by resample as sacreBLEU does it.
    differences = []
    for row in SMALL.bootstrap_weights(60):
        chosen = draws(row)
        differences.append(abs(system[chosen].mean() - baseline[chosen].mean()))
    spread = np.array(differences)
    expected = at_least_as_extreme(spread - spread.mean(), real)
    assert paired_bootstrap_p(samples) == pytest.approx(expected)
    # Without ties among continuous scores, the same as sacreBLEU's strict count.
    assert expected == _compute_p_value(spread - spread.mean(), real)

    # Approximate randomization: swap the two outputs of the chosen sentences.
    statistics = []
    for swap in SMALL.swap_masks(60).astype(bool):
        a = np.where(swap, system, baseline)
        b = np.where(swap, baseline, system)
        statistics.append(abs(a.mean() - b.mean()))
    expected = at_least_as_extreme(np.array(statistics), real)
    assert approximate_randomization_p(samples) == pytest.approx(expected, abs=1 / 2001)


def test_a_difference_of_zero_or_a_tie_is_never_significant() -> None:
    """sacreBLEU 2.6 counts only trials strictly beyond the observed difference: a system
    compared with itself gets p = 1 / (trials + 1). Ties count here, as the test defines it."""
    rng = np.random.default_rng(6)
    scores = rng.uniform(0, 100, size=80)
    identical = paired_samples(scores, scores.copy(), SMALL)
    assert identical.delta == 0
    assert paired_bootstrap_p(identical) == 1.0
    assert approximate_randomization_p(identical) == 1.0
    strict = _compute_p_value(np.abs(identical.ar_deltas), 0.0)
    assert strict == 1 / (SMALL.ar_trials + 1)  # what sacreBLEU's comparison would report

    # One sentence differs: every swap trial reproduces |delta| exactly, a tie each time.
    one_sentence = scores.copy()
    one_sentence[3] += 7.5
    samples = paired_samples(scores, one_sentence, SMALL)
    assert np.allclose(np.abs(samples.ar_deltas), abs(samples.delta), rtol=1e-12, atol=0)
    assert approximate_randomization_p(samples) == 1.0

    # Through compare_models: identical systems get p = 1 in every direction and overall.
    rows = scored_rows(0, seed=8)
    comparison = compare_models({"a": rows, "b": rows.copy()}, "a", ["chrfpp"], SMALL)
    assert (comparison["delta"].dropna() == 0).all()
    finite = comparison.dropna(subset=["p_paired_bootstrap"])
    assert len(finite) == 4  # three directions and the overall row
    assert (finite["p_paired_bootstrap"] == 1.0).all()
    assert (finite["p_approximate_randomization"] == 1.0).all()


def test_paired_tests_tell_real_differences_from_noise() -> None:
    rng = np.random.default_rng(2)
    baseline = rng.uniform(0, 100, size=200)
    better = paired_samples(baseline, baseline + 5 + rng.normal(0, 3, size=200), SMALL)
    jitter = rng.normal(0, 3, size=200)
    noise = paired_samples(baseline, baseline + jitter - jitter.mean(), SMALL)
    assert paired_bootstrap_p(better) < 0.01 and approximate_randomization_p(better) < 0.01
    assert paired_bootstrap_p(noise) > 0.05 and approximate_randomization_p(noise) > 0.05


def test_pooling_is_the_macro_average() -> None:
    rng = np.random.default_rng(3)
    one = paired_samples(rng.uniform(size=30), rng.uniform(size=30), SMALL)
    two = paired_samples(rng.uniform(size=50), rng.uniform(size=50), SMALL)
    pooled = pool([one, two])
    assert pooled.baseline_mean == pytest.approx((one.baseline_mean + two.baseline_mean) / 2)
    assert pooled.delta == pytest.approx((one.delta + two.delta) / 2)
    assert pooled.n_sentences == 80
    np.testing.assert_allclose(pooled.ar_deltas, (one.ar_deltas + two.ar_deltas) / 2)


def scored_rows(model_offset: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frames = []
    for tgt in ("fra_Latn", "deu_Latn"):
        for src in ("eng_Latn",):
            n = 40
            frames.append(
                pd.DataFrame(
                    {
                        "src_lang": src,
                        "tgt_lang": tgt,
                        "uniq_id": [f"s{i}" for i in range(n)],
                        "mt_text": ["x"] * n,
                        "ref_text": ["x"] * n,
                        "chrfpp": rng.uniform(20, 60, size=n) + model_offset,
                        "glotlid_pred": ["fra_Latn"] * n,
                    }
                )
            )
    frames.append(
        pd.DataFrame(
            {
                "src_lang": "fra_Latn",
                "tgt_lang": "eng_Latn",
                "uniq_id": ["s0", "s1"],
                "mt_text": ["Hello there", "Good night"],
                "ref_text": ["Hello there!", "Good evening"],
                "chrfpp": [50.0, np.nan],
                "glotlid_pred": ["eng_Latn"] * 2,
            }
        )
    )
    return pd.concat(frames, ignore_index=True)


def test_direction_scores_and_summary() -> None:
    rows = scored_rows(0, seed=4)
    chrf = load_metric("chrf")
    assert isinstance(chrf, CorpusMetric)
    rows = score_rows(rows.drop(columns=["chrfpp"]), [chrf]).assign(chrfpp=rows["chrfpp"])
    scores = direction_scores(rows, ["chrfpp", "glotlid_pred"], SMALL, [chrf])
    assert list(scores.columns) == [
        "src_lang", "tgt_lang", "n_sentences",
        "chrfpp", "chrfpp_ci_low", "chrfpp_ci_high", "chrfpp_corpus",
    ]  # fmt: skip
    fra_eng = scores[scores["src_lang"] == "fra_Latn"].iloc[0]
    assert fra_eng["n_sentences"] == 2 and fra_eng["chrfpp"] == 50.0
    assert (
        fra_eng["chrfpp_corpus"]
        == CHRF(word_order=2)
        .corpus_score(["Hello there", "Good night"], [["Hello there!", "Good evening"]])
        .score
    )
    # Statistics are never taken for scores: without the metric, no corpus score is made.
    assert list(direction_scores(rows, ["chrfpp"], SMALL).columns)[-1] == "chrfpp_ci_high"

    directions = [
        direction_values(pa.Table.from_pandas(group), ["chrfpp"], [chrf], "test")
        for _, group in rows.groupby(["src_lang", "tgt_lang"])
    ]
    table = score_table(directions, ["chrfpp"], {"chrfpp"}, SMALL)
    pd.testing.assert_frame_equal(table.scores, scores)
    overview = summary(table)
    assert list(overview.columns) == [
        "group_by", "group", "n_directions",
        "chrfpp", "chrfpp_ci_low", "chrfpp_ci_high", "chrfpp_corpus",
    ]  # fmt: skip
    overview = overview.set_index(["group_by", "group"])
    assert overview.loc[("all", "all"), "n_directions"] == 3
    assert overview.loc[("all", "all"), "chrfpp"] == pytest.approx(scores["chrfpp"].mean())
    assert overview.loc[("all", "all"), "chrfpp_corpus"] == scores["chrfpp_corpus"].mean()
    assert overview.loc[("english", "into_english"), "chrfpp"] == 50.0
    out_of_english = scores[scores["src_lang"] == "eng_Latn"]["chrfpp"].mean()
    assert overview.loc[("english", "out_of_english"), "chrfpp"] == pytest.approx(out_of_english)
    assert overview.loc[("tgt_lang", "deu_Latn"), "n_directions"] == 1
    assert ("english", "without_english") not in overview.index

    # Model-level intervals resample sentences within each direction of the group.
    ordered = [group["chrfpp"].to_numpy() for _, group in rows.groupby(["src_lang", "tgt_lang"])]
    interval = tuple(overview.loc[("all", "all"), ["chrfpp_ci_low", "chrfpp_ci_high"]])
    assert interval == macro_bootstrap_interval(ordered, SMALL)
    low, high = interval
    assert low < overview.loc[("all", "all"), "chrfpp"] < high
    out = tuple(overview.loc[("english", "out_of_english"), ["chrfpp_ci_low", "chrfpp_ci_high"]])
    assert out == macro_bootstrap_interval(ordered[:2], SMALL)
    # A group of one direction has that direction's own interval.
    single = tuple(overview.loc[("tgt_lang", "deu_Latn"), ["chrfpp_ci_low", "chrfpp_ci_high"]])
    deu = scores[scores["tgt_lang"] == "deu_Latn"].iloc[0]
    assert single == (deu["chrfpp_ci_low"], deu["chrfpp_ci_high"])


def test_vectorised_bootstrap_is_one_vector_at_a_time_to_the_last_bit() -> None:
    """Missing values scattered over directions make many sizes, met in any order; a vector's
    resample means are the same, to the last bit, alone or among others."""
    rng = np.random.default_rng(9)
    vectors = []
    for _ in range(30):
        values = rng.uniform(0, 100, size=int(rng.integers(40, 46)))
        values[rng.random(values.size) < 0.1] = np.nan
        vectors.append(values)
    vectors.append(np.full(5, np.nan))
    resampled = bootstrap_mean_matrix(vectors, SMALL)
    for values, row in zip(vectors, resampled, strict=True):
        finite = values[np.isfinite(values)]
        if finite.size:
            assert np.array_equal(row, bootstrap_mean_matrix([values], SMALL)[0])
            # The definition: each resample's mean.
            definition = SMALL.bootstrap_weights(finite.size) @ finite / finite.size
            np.testing.assert_allclose(row, definition, rtol=1e-13)
            draws_mean = [finite[draws(w)].mean() for w in SMALL.bootstrap_weights(finite.size)]
            np.testing.assert_allclose(row, draws_mean, rtol=1e-12)
            assert bootstrap_interval(values, SMALL) == percentile_interval(row)
            assert skipna_mean(values) == pd.Series(values).mean()
        else:
            assert np.isnan(row).all() and np.isnan(skipna_mean(values))
    lows, highs = percentile_intervals(resampled)
    assert [(low, high) for low, high in zip(lows[:-1], highs[:-1], strict=True)] == [
        percentile_interval(row) for row in resampled[:-1]
    ]


def test_compare_models() -> None:
    baseline, better = scored_rows(0, seed=5), scored_rows(0, seed=5)
    better["chrfpp"] += 4
    comparison = compare_models({"a": baseline, "b": better}, "a", ["chrfpp"], SMALL)
    overall = comparison[comparison["src_lang"] == "all"].iloc[0]
    assert overall["system"] == "b" and overall["metric"] == "chrfpp"
    assert overall["delta"] == pytest.approx(4.0)
    assert overall["p_paired_bootstrap"] < 0.01
    assert len(comparison) == 4  # three directions and the overall row

    shuffled = better.sample(frac=1.0, random_state=0)
    pd.testing.assert_frame_equal(
        compare_models({"a": baseline, "b": shuffled}, "a", ["chrfpp"], SMALL), comparison
    )
    with pytest.raises(ValueError, match=r"b lacks eng_Latn-fra_Latn sentence s3"):
        compare_models({"a": baseline, "b": better.drop(index=3)}, "a", ["chrfpp"], SMALL)
    with pytest.raises(ValueError, match="two models or more"):
        compare_models({"a": baseline}, "a", ["chrfpp"], SMALL)


def test_macro_interval_resamples_within_directions() -> None:
    resampling = Resampling(seed=3, bootstrap_resamples=400)
    rng = np.random.default_rng(0)
    directions = [rng.normal(loc, 5.0, size) for loc, size in ((20, 30), (60, 50), (40, 40))]
    low, high = macro_bootstrap_interval(directions, resampling)
    macro = np.mean([values.mean() for values in directions])
    assert low < macro < high
    # The same draws as each direction's own interval, averaged resample by resample.
    per_direction = [resampling.bootstrap_weights(v.size) @ v / v.size for v in directions]
    assert (low, high) == percentile_interval(np.mean(per_direction, axis=0))
    # A direction without any finite score is left out, like it is of the macro mean.
    assert macro_bootstrap_interval([*directions, [np.nan, np.nan]], resampling) == (low, high)
    assert all(np.isnan(macro_bootstrap_interval([[np.nan]], resampling)))


def test_paired_samples_of_many_directions_are_each_directions_own() -> None:
    """Directions of one size are resampled in one product: the same means and p-values as
    each alone, resamples equal to the last bits of a sum taken in another order."""
    rng = np.random.default_rng(10)
    pairs = []
    for size in (30, 31, 30, 29, 31, 30):
        baseline, system = rng.uniform(0, 100, size=(2, size))
        baseline[rng.random(size) < 0.1] = np.nan
        pairs.append((baseline, system))
    for (baseline, system), samples in zip(pairs, paired_samples_of(pairs, SMALL), strict=True):
        alone = paired_samples(baseline, system, SMALL)
        assert (samples.delta, samples.n_sentences) == (alone.delta, alone.n_sentences)
        np.testing.assert_allclose(samples.bootstrap_deltas, alone.bootstrap_deltas, rtol=1e-12)
        np.testing.assert_allclose(samples.ar_deltas, alone.ar_deltas, rtol=1e-12)
        assert paired_bootstrap_p(samples) == paired_bootstrap_p(alone)
        assert approximate_randomization_p(samples) == approximate_randomization_p(alone)
