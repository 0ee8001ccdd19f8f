"""Paired comparison of models evaluated on the same sentences: comparison.csv, and the
report's tests of every model against a baseline (`versus_baseline`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from bouquet_eval.core.stats import (
    PairedSamples,
    Resampling,
    approximate_randomization_p,
    benjamini_hochberg,
    paired_bootstrap_p,
    paired_samples_of,
    pool,
)
from bouquet_eval.results.aggregate import GROUP_COLUMNS, numeric_columns
from bouquet_eval.results.resampled import ResampledScores, paired_bootstrap

SENTENCE_KEY = [*GROUP_COLUMNS, "uniq_id"]
P_VALUE_COLUMNS = ("p_paired_bootstrap", "p_approximate_randomization")
POOLED = "all"
"""src_lang and tgt_lang of the row that pools every direction of a comparison."""


def compare_models(
    rows_by_model: Mapping[str, pd.DataFrame],
    baseline: str,
    metric_columns: Sequence[str],
    resampling: Resampling,
) -> pd.DataFrame:
    """Every other model against `baseline`, per metric: per direction, then over all of them.

    `delta` is system minus baseline; mind each metric's direction (lower MetricX is better).
    Each p-value column has a `_bh` twin: corrected (Benjamini-Hochberg) over the directions of
    one system and metric; the pooled row is a single test and keeps its raw p-value there.
    """
    if len(rows_by_model) < 2:
        raise ValueError(f"a comparison needs two models or more, not {list(rows_by_model)}")
    base = rows_by_model[baseline]
    records = []
    for name, rows in rows_by_model.items():
        if name == baseline:
            continue
        _check_same_sentences(baseline, base, name, rows)
        columns = [c for c in numeric_columns(base, metric_columns) if c in rows]
        merged = base[SENTENCE_KEY + columns].merge(
            rows[SENTENCE_KEY + columns], on=SENTENCE_KEY, suffixes=("_baseline", "_system")
        )
        groups = list(merged.groupby(GROUP_COLUMNS, sort=True))
        for column in columns:
            pairs = [
                (group[f"{column}_baseline"], group[f"{column}_system"]) for _, group in groups
            ]
            per_direction = paired_samples_of(pairs, resampling)
            for ((src_lang, tgt_lang), _), samples in zip(groups, per_direction, strict=True):
                records.append(_record(column, baseline, name, src_lang, tgt_lang, samples))
            records.append(_record(column, baseline, name, POOLED, POOLED, pool(per_direction)))
    return with_corrected_p_values(pd.DataFrame.from_records(records))


def with_corrected_p_values(comparison: pd.DataFrame) -> pd.DataFrame:
    """`comparison` with a Benjamini-Hochberg `<p column>_bh` beside each p-value column."""
    pooled = comparison["src_lang"] == POOLED
    for column in P_VALUE_COLUMNS:
        corrected = comparison[column].copy()
        for _, family in comparison[~pooled].groupby(["system", "metric"], sort=False):
            corrected[family.index] = benjamini_hochberg(family[column].to_numpy())
        position = comparison.columns.get_loc(column) + 1
        comparison.insert(position, f"{column}_bh", corrected)
    return comparison


def _check_same_sentences(baseline: str, base: pd.DataFrame, name: str, rows: pd.DataFrame) -> None:
    expected = set(map(tuple, base[SENTENCE_KEY].to_numpy()))
    found = set(map(tuple, rows[SENTENCE_KEY].to_numpy()))
    if expected != found:
        missing = sorted(expected ^ found)[0]
        side = name if missing in expected else baseline
        raise ValueError(
            f"models '{baseline}' and '{name}' were not evaluated on the same sentences: "
            f"{side} lacks {missing[0]}-{missing[1]} sentence {missing[2]}"
        )
    for label, frame in ((baseline, base), (name, rows)):
        duplicated = frame.duplicated(SENTENCE_KEY)
        if duplicated.any():
            row = frame[duplicated].iloc[0]
            raise ValueError(
                f"model '{label}': sentence {row['uniq_id']} appears twice in "
                f"{row['src_lang']}-{row['tgt_lang']}"
            )


def _record(
    metric: str, baseline: str, system: str, src_lang: str, tgt_lang: str, samples: PairedSamples
) -> dict[str, object]:
    return {
        "metric": metric,
        "baseline": baseline,
        "system": system,
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "n_sentences": samples.n_sentences,
        "baseline_mean": samples.baseline_mean,
        "system_mean": samples.system_mean,
        "delta": samples.delta,
        "p_paired_bootstrap": paired_bootstrap_p(samples),
        "p_approximate_randomization": approximate_randomization_p(samples),
    }


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
