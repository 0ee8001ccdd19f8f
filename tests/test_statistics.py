"""Bootstrap intervals, paired tests, summaries and comparisons."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sacrebleu.significance import _compute_p_value, estimate_ci

from bouquet_eval.aggregate import direction_scores, summary
from bouquet_eval.compare import compare_models
from bouquet_eval.stats import (
    Resampling,
    approximate_randomization_p,
    bootstrap_interval,
    macro_bootstrap_interval,
    paired_bootstrap_p,
    paired_samples,
    percentile_interval,
    pool,
)

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


def test_paired_tests_follow_sacrebleu() -> None:
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
    differences = np.array(differences)
    assert paired_bootstrap_p(samples) == _compute_p_value(differences - differences.mean(), real)

    # Approximate randomization: swap the two outputs of the chosen sentences.
    statistics = []
    for swap in SMALL.swap_masks(60).astype(bool):
        a = np.where(swap, system, baseline)
        b = np.where(swap, baseline, system)
        statistics.append(abs(a.mean() - b.mean()))
    expected = _compute_p_value(np.array(statistics), real)
    assert approximate_randomization_p(samples) == pytest.approx(expected, abs=1 / 2001)


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
    scores = direction_scores(rows, ["chrfpp", "glotlid_pred"], SMALL)
    assert list(scores.columns) == [
        "src_lang", "tgt_lang", "n_sentences",
        "chrfpp", "chrfpp_ci_low", "chrfpp_ci_high", "chrfpp_corpus",
    ]  # fmt: skip
    fra_eng = scores[scores["src_lang"] == "fra_Latn"].iloc[0]
    assert fra_eng["n_sentences"] == 2 and fra_eng["chrfpp"] == 50.0
    from sacrebleu.metrics import CHRF

    assert (
        fra_eng["chrfpp_corpus"]
        == CHRF(word_order=2)
        .corpus_score(["Hello there", "Good night"], [["Hello there!", "Good evening"]])
        .score
    )
    table = summary(scores).set_index(["group_by", "group"])
    assert table.loc[("all", "all"), "n_directions"] == 3
    assert table.loc[("all", "all"), "chrfpp"] == pytest.approx(scores["chrfpp"].mean())
    assert table.loc[("english", "into_english"), "chrfpp"] == 50.0
    out_of_english = scores[scores["src_lang"] == "eng_Latn"]["chrfpp"].mean()
    assert table.loc[("english", "out_of_english"), "chrfpp"] == pytest.approx(out_of_english)
    assert table.loc[("tgt_lang", "deu_Latn"), "n_directions"] == 1
    assert ("english", "without_english") not in table.index


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
