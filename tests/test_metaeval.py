"""Meta-evaluation: judgement tables in, checked before any job; agreement statistics equal to
scipy.stats and to straightforward references; correlations.csv through the workflow's own
score jobs."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sacrebleu
from scipy import stats as scipy_stats

from bouquet_eval.core.config import ConfigError
from bouquet_eval.core.names import folder_name
from bouquet_eval.core.stats import Resampling, benjamini_hochberg, percentile_interval
from bouquet_eval.data.dataset import Direction
from bouquet_eval.data.judgements import (
    JudgementError,
    JudgementSource,
    check_judgements,
    judged_systems,
    read_table,
    resolve_judgements,
)
from bouquet_eval.metrics.records import MetricSet
from bouquet_eval.results import weighted_agreement
from bouquet_eval.results.agreement import (
    Agreement,
    Items,
    acc_eq,
    acc_eq_pooled,
    agreement,
    kendall_tau_b,
    pearson,
    spearman,
)
from bouquet_eval.results.correlations import POOLS, Settings, correlations, scored_columns
from bouquet_eval.results.mtme_judged import export_judgements
from bouquet_eval.results.permutation import permutation_p, standardized, swap_masks
from bouquet_eval.results.trust import (
    HEADLINE_STATES,
    agreement_notes,
    trust_data,
    trust_page,
)
from bouquet_eval.results.weighted_agreement import resampled_statistics

from . import browser
from .conftest import SAMPLE, Workflow, files_under
from .hub_datasets import MET_BOUQUET_FILES, bouquet_on_hub, met_bouquet_on_hub
from .hub_server import HubServer, files_of
from .mtme_reader import read_language_pair
from .sample_forms import DEFAULT_COLUMNS, sample_judgements
from .synthetic import bouquet_shaped_directions
from .workflow_configs import SMALL_JOBS, met_bouquet_config

TOLERANCE = 1e-9
DIRECTIONS = ["eng_Latn-fra_Latn", "fra_Latn-eng_Latn", "deu_Latn-eng_Latn", "arb_Arab-fra_Latn"]
SYSTEMS = ["alpha", "beta", "gamma", "delta"]


def synthetic_judgements(
    segments: int = 12, seed: int = 7, directions: list[str] = DIRECTIONS
) -> pd.DataFrame:
    """Met-BOUQuET's assumed layout: systems of known quality (alpha best), human scores on a
    1-5 scale with ties, and texts whose closeness to the reference follows the score."""
    rng = np.random.default_rng(seed)
    rows = []
    for direction in directions:
        src, tgt = direction.split("-")
        for segment in range(segments):
            reference = f"the reference sentence number {segment} of {direction} reads well"
            for quality, system in enumerate(SYSTEMS):
                score = int(np.clip(5 - quality + rng.integers(-1, 2), 1, 5))
                words = reference.split()
                kept = max(1, round(len(words) * score / 5))
                rows.append(
                    {
                        "src_lang": src,
                        "tgt_lang": tgt,
                        "src_text": f"source {segment} {direction}",
                        "mt_text": " ".join(words[:kept] + ["noise"] * (5 - score)),
                        "tgt_text": reference,
                        "system": system,
                        "score": score,
                        "uniq_id": f"seg{segment:03d}",
                    }
                )
    return pd.DataFrame(rows)


def checked(frame: pd.DataFrame, path: Path = Path("judged.parquet"), **kwargs) -> pd.DataFrame:
    return check_judgements(frame, path, DEFAULT_COLUMNS, **kwargs)


# --- Statistics against scipy.stats and references -------------------------------------------


@pytest.mark.parametrize("size", [2, 3, 7, 50, 400, 2001, 5000])
def test_correlations_equal_scipy(size: int) -> None:
    rng = np.random.default_rng(size)
    for x, y in (
        (rng.normal(size=size), rng.normal(size=size)),
        (rng.integers(0, 4, size).astype(float), rng.normal(size=size).round(1)),
        (rng.integers(0, 3, size).astype(float), rng.integers(0, 3, size).astype(float)),
    ):
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        assert abs(pearson(x, y) - scipy_stats.pearsonr(x, y).statistic) < TOLERANCE
        assert abs(spearman(x, y) - scipy_stats.spearmanr(x, y).statistic) < TOLERANCE
        expected = scipy_stats.kendalltau(x, y, variant="b").statistic
        assert abs(kendall_tau_b(x, y) - expected) < TOLERANCE


def reference_acc_eq(
    human, metric, items, pooled: bool = False, epsilon_at: float | None = None
) -> tuple[float, float]:
    """Pairs within items, every candidate epsilon tried in turn (or only `epsilon_at`): the
    accuracy averaged over items (exactly, in fractions), or over all pairs pooled; the
    smallest best epsilon."""
    pairs = [
        (i, j) for i in range(len(items)) for j in range(i + 1, len(items)) if items[i] == items[j]
    ]
    candidates = sorted({0.0} | {abs(metric[i] - metric[j]) for i, j in pairs})
    if epsilon_at is not None:
        candidates = [epsilon_at]
    best = (Fraction(-1), 0.0)
    for epsilon in candidates:
        right: dict[object, list[int]] = {}
        for i, j in pairs:
            human_delta, metric_delta = human[i] - human[j], metric[i] - metric[j]
            if abs(metric_delta) <= epsilon:
                correct = human_delta == 0
            else:
                correct = human_delta != 0 and (human_delta > 0) == (metric_delta > 0)
            right.setdefault("all" if pooled else items[i], []).append(int(correct))
        shares = [Fraction(sum(values), len(values)) for values in right.values()]
        accuracy = sum(shares, Fraction(0)) / len(shares)
        if accuracy > best[0]:
            best = (accuracy, epsilon)
    return float(best[0]), best[1]


@pytest.mark.parametrize("seed", range(6))
def test_acc_eq_equals_the_reference(seed: int) -> None:
    """Averaged over items (MTME's) and pooled: the accuracy, and an epsilon that gives it (the
    smallest for the pooled variant; MTME's own choice among equal averages is
    tests/test_mtme_statistics.py's)."""
    rng = np.random.default_rng(seed)
    items = rng.integers(0, 8, 40)
    human = rng.integers(0, 3, 40).astype(float)
    metric = (human + rng.normal(scale=1.5, size=40)).round(seed % 3)
    accuracy, epsilon = acc_eq(human, metric, items)
    expected_accuracy, _ = reference_acc_eq(human, metric, items)
    assert abs(accuracy - expected_accuracy) < TOLERANCE
    at_epsilon = reference_acc_eq(human, metric, items, epsilon_at=epsilon)
    assert abs(at_epsilon[0] - expected_accuracy) < TOLERANCE
    pooled, pooled_epsilon = acc_eq_pooled(human, metric, items)
    assert (pooled, pooled_epsilon) == pytest.approx(reference_acc_eq(human, metric, items, True))


@pytest.mark.parametrize("chunk_cells", [weighted_agreement.CHUNK_CELLS, 100])
def test_permutation_test_equals_the_reference(
    chunk_cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(weighted_agreement, "CHUNK_CELLS", chunk_cells)
    rng = np.random.default_rng(3)
    human = rng.integers(1, 6, 60).astype(float)
    good = (human + rng.normal(scale=1.0, size=60)).round()  # ties in both
    poor = (human + rng.normal(scale=3.0, size=60)).round()
    items = np.repeat(np.arange(15), 4)
    for statistic, function in (
        ("kendall", lambda h, m: scipy_stats.kendalltau(m, h).statistic),
        ("pearson", lambda h, m: scipy_stats.pearsonr(m, h).statistic),
        ("spearman", lambda h, m: scipy_stats.spearmanr(m, h).statistic),
        ("acc_eq", lambda h, m: reference_acc_eq(h, m, items)[0]),
    ):
        trials = 30 if statistic == "acc_eq" else 200
        delta, p = permutation_p(statistic, human, good, poor, items, 11, trials)
        a, b = standardized(good), standardized(poor)
        observed = function(human, a) - function(human, b)
        count = 0
        for mask in swap_masks(11, trials, human.size):
            swapped = function(human, np.where(mask, b, a)) - function(human, np.where(mask, a, b))
            count += swapped >= observed - 1e-9
        assert abs(delta - observed) < TOLERANCE
        assert abs(p - (count + 1) / (trials + 1)) < TOLERANCE


def scipy_row(part: pd.DataFrame, metric: str) -> dict[str, float]:
    """The statistics of one scope, computed independently."""
    human, values = part["human"].to_numpy(float), part[metric].to_numpy(float)
    items = (part["src_lang"] + part["tgt_lang"] + part["segment"]).to_numpy()
    row = {
        "pearson": scipy_stats.pearsonr(values, human).statistic,
        "spearman": scipy_stats.spearmanr(values, human).statistic,
        "kendall": scipy_stats.kendalltau(values, human).statistic,
        "acc_eq": reference_acc_eq(human, values, items)[0],
    }
    agreeing = pairs = 0
    for _, direction in part.groupby(["src_lang", "tgt_lang"]):
        means = direction.groupby("system")[["human", metric]].mean()
        for a, b in itertools.combinations(means.index, 2):
            pairs += 1
            agreeing += np.sign(means.loc[a, "human"] - means.loc[b, "human"]) == np.sign(
                means.loc[a, metric] - means.loc[b, metric]
            )
        if part[["src_lang", "tgt_lang"]].drop_duplicates().shape[0] == 1:
            row["system_pearson"] = scipy_stats.pearsonr(means[metric], means["human"]).statistic
    row["system_accuracy"] = agreeing / pairs
    return row


def test_correlations_csv_rows_equal_independent_computations() -> None:
    table = checked(synthetic_judgements())
    rng = np.random.default_rng(5)
    table["close"] = table["human"] + rng.normal(scale=0.7, size=len(table))
    table["far"] = table["human"] + rng.normal(scale=3.0, size=len(table))
    settings = Settings(bootstrap_resamples=40, permutation_trials=60, decide_by="kendall")
    scores = {m: table[m].to_numpy() for m in ("close", "far")}
    frame = correlations(table, scores, settings)
    pools = {"all", "into_english", "out_of_english", "without_english"}
    assert set(frame["name"]) == {*DIRECTIONS, *pools}
    direction = table["src_lang"] + "-" + table["tgt_lang"]
    scope_rows = {
        **{name: table[direction == name] for name in DIRECTIONS},
        "all": table,
        "into_english": table[table["tgt_lang"] == "eng_Latn"],
        "out_of_english": table[table["src_lang"] == "eng_Latn"],
        "without_english": table[
            (table["src_lang"] != "eng_Latn") & (table["tgt_lang"] != "eng_Latn")
        ],
    }
    for record in frame.itertuples():
        part = scope_rows[record.name]
        assert record.n_segments == len(part) and record.n_systems == 4
        for statistic, value in scipy_row(part, record.metric).items():
            assert abs(getattr(record, statistic) - value) < TOLERANCE, (record.name, statistic)
    # The known structure: the close metric is best everywhere, significantly after correction.
    best = frame[frame["best"]]
    assert list(best["metric"]) == ["close"] * len(best) == ["close"] * 8
    tested = frame[~frame["best"]]
    assert tested["best_significantly_better"].all()
    assert np.allclose(tested["p_vs_best_adjusted"], benjamini_hochberg(tested["p_vs_best"]))


def test_threads_change_no_number(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of scopes and of tests run side by side in threads give the same table."""
    monkeypatch.setattr(weighted_agreement, "BATCH_ROWS", 100)  # several batches
    table = checked(synthetic_judgements(segments=8))
    rng = np.random.default_rng(9)
    scores = {m: table["human"].to_numpy() + rng.normal(scale=s, size=len(table))
              for m, s in (("a", 0.8), ("b", 1.6))}  # fmt: skip
    settings = Settings(bootstrap_resamples=30, permutation_trials=30)
    alone = correlations(table, scores, settings)
    together = correlations(table, scores, settings, workers=2)
    pd.testing.assert_frame_equal(alone, together)


def test_bootstrap_interval_equals_resampling_items_by_hand() -> None:
    table = checked(synthetic_judgements(segments=10))
    one = table[(table["src_lang"] == "eng_Latn")].reset_index(drop=True)
    metric = one["human"].to_numpy() + np.random.default_rng(1).normal(size=len(one))
    frame = correlations(one, {"m": metric}, Settings(bootstrap_resamples=50, permutation_trials=5))
    row = frame.iloc[0]
    segments = sorted(one["segment"].unique())
    draws = Resampling(bootstrap_resamples=50).bootstrap_weights(len(segments))
    samples = []
    for counts in draws:
        picked = [i for s, c in zip(segments, counts, strict=True) for i in [s] * int(c)]
        rows = pd.concat([one[one["segment"] == s] for s in picked])
        samples.append(scipy_stats.kendalltau(metric[rows.index], rows["human"]).statistic)
    low, high = percentile_interval(np.array(samples))
    assert abs(row["kendall_low"] - low) < TOLERANCE and abs(row["kendall_high"] - high) < TOLERANCE


@pytest.mark.parametrize("rounding", [None, 0])
def test_resampled_statistics_equal_the_loop_over_resampled_rows(rounding: int | None) -> None:
    """All resamples at once (weights) give what each resample's rows give to `agreement`,
    for one direction and for a pool, with ties in both scores when rounded."""
    table = checked(synthetic_judgements(segments=9))
    rng = np.random.default_rng(2)
    metric = table["human"].to_numpy() + rng.normal(scale=1.5, size=len(table))
    if rounding is not None:
        metric = metric.round(rounding)
    direction = (table["src_lang"] + "-" + table["tgt_lang"]).to_numpy()
    for rows in (np.flatnonzero(direction == DIRECTIONS[0]), np.arange(len(table))):
        part = table.iloc[rows]
        human = part["human"].to_numpy(float)
        items = pd.factorize(part["src_lang"] + part["tgt_lang"] + part["segment"], sort=True)[0]
        systems = pd.factorize(part["system"], sort=True)[0]
        groups = pd.factorize(part["src_lang"] + part["tgt_lang"], sort=True)[0]
        draws = Resampling(bootstrap_resamples=60).bootstrap_weights(items.max() + 1)
        draws[0, : items.max()] = 0  # a resample of one item: statistics undefined
        batched = resampled_statistics(human, metric[rows], items, systems, groups, draws)
        grouped = Items.of(items)
        for trial, counts in enumerate(draws):
            picked, copies = grouped.resample(counts)
            one = agreement(
                human[picked], metric[rows][picked], copies, systems[picked], groups[picked]
            )
            expected = np.array([getattr(one, name) for name in Agreement.statistics()])
            got = batched[:, trial]
            assert (np.isnan(expected) == np.isnan(got)).all(), (trial, expected, got)
            finite = np.isfinite(expected)
            assert np.abs(expected[finite] - got[finite]).max(initial=0) < TOLERANCE, trial


def resampled_by_hand(part: pd.DataFrame, metric: np.ndarray, resampling: Resampling) -> np.ndarray:
    """(statistics, resamples) of `agreement` over rows drawn by hand: each direction's items
    drawn together (Resampling's draws of its size), copies of an item apart."""
    human = part["human"].to_numpy(float)
    items = pd.factorize(part["src_lang"] + part["tgt_lang"] + part["segment"], sort=True)[0]
    systems = pd.factorize(part["system"], sort=True)[0]
    groups = pd.factorize(part["src_lang"] + part["tgt_lang"], sort=True)[0]
    per_direction = [np.flatnonzero(groups == group) for group in range(groups.max() + 1)]
    samples = np.full((len(Agreement.statistics()), resampling.bootstrap_resamples), np.nan)
    for trial in range(resampling.bootstrap_resamples):
        picked: list[np.ndarray] = []
        copies: list[np.ndarray] = []
        for rows in per_direction:
            grouped = Items.of(items[rows])
            counts = resampling.bootstrap_weights(grouped.starts.size)[trial]
            chosen, copy = grouped.resample(counts)
            picked.append(rows[chosen])
            copies.append(copy + sum(c.size for c in copies))
        rows, copy = np.concatenate(picked), np.concatenate(copies)
        one = agreement(human[rows], metric[rows], copy, systems[rows], groups[rows])
        samples[:, trial] = [getattr(one, name) for name in Agreement.statistics()]
    return samples


def test_intervals_of_every_scope_equal_resampling_by_hand() -> None:
    """correlations.csv's intervals, directions and pools computed together, equal those of
    resampling each scope's rows by hand; a metric's missing scores leave its rows out (and
    its directions' draws are those of the items left)."""
    table = checked(synthetic_judgements(segments=7))
    rng = np.random.default_rng(4)
    metric = table["human"].to_numpy() + rng.normal(scale=1.2, size=len(table))
    metric[[0, 1, 2, 3, 29, 60]] = np.nan  # a whole item, and single rows
    resampling = Resampling(bootstrap_resamples=40)
    frame = correlations(
        table, {"m": metric}, Settings(bootstrap_resamples=40, permutation_trials=5)
    )
    direction = table["src_lang"] + "-" + table["tgt_lang"]
    masks = {name: (direction == name).to_numpy() for name in DIRECTIONS}
    masks["all"] = np.ones(len(table), bool)
    masks["into_english"] = (table["tgt_lang"] == "eng_Latn").to_numpy()
    masks["out_of_english"] = (table["src_lang"] == "eng_Latn").to_numpy()
    masks["without_english"] = (direction == "arb_Arab-fra_Latn").to_numpy()
    for record in frame.itertuples():
        rows = np.flatnonzero(masks[record.name] & np.isfinite(metric))
        samples = resampled_by_hand(table.iloc[rows], metric[rows], resampling)
        for name, values in zip(Agreement.statistics(), samples, strict=True):
            finite = values[np.isfinite(values)]
            low, high = percentile_interval(finite) if finite.size else (np.nan, np.nan)
            got = getattr(record, f"{name}_low"), getattr(record, f"{name}_high")
            assert np.allclose(got, (low, high), rtol=0, atol=TOLERANCE, equal_nan=True), (
                record.name,
                name,
            )


@pytest.mark.parametrize("ties", ["human continuous, metric in 3 values", "both continuous"])
def test_segments_weighted_together_equal_each_alone(ties: str) -> None:
    """Many segments of weighted rows at once (the directions and pools of a metric, or the
    tests of a run) give each segment's statistics, whichever variable has fewer values."""
    rng = np.random.default_rng(8)
    sizes = [12, 40, 7, 33]
    segments = np.repeat(np.arange(len(sizes)), sizes)
    n = segments.size
    human = rng.normal(size=n).round(2)
    metric = rng.integers(0, 3, n).astype(float) if "3 values" in ties else rng.normal(size=n)
    columns = rng.integers(0, 20, n)
    weights = rng.integers(0, 3, (9, 20)).astype(np.int32)
    segmented = weighted_agreement.SegmentedRows(human, metric, columns, segments)
    found = segmented.statistics(weights, ("pearson", "spearman", "kendall"))
    for trial, row in enumerate(weights):
        for segment in range(len(sizes)):
            inside = segments == segment
            repeat = row[columns[inside]]
            x, y = np.repeat(metric[inside], repeat), np.repeat(human[inside], repeat)
            expected = {
                "pearson": scipy_stats.pearsonr(x, y).statistic if x.size > 1 else np.nan,
                "spearman": scipy_stats.spearmanr(x, y).statistic if x.size > 1 else np.nan,
                "kendall": scipy_stats.kendalltau(x, y).statistic if x.size > 1 else np.nan,
            }
            for name, value in expected.items():
                got = found[name][trial, segment]
                assert np.isclose(got, value, rtol=0, atol=TOLERANCE, equal_nan=True), (
                    name,
                    trial,
                    segment,
                )


def test_items_resample_keeps_copies_apart() -> None:
    grouped = Items.of(np.array([2, 0, 2, 1, 0]))
    rows, copies = grouped.resample(np.array([0, 2, 1]))
    assert sorted(rows.tolist()) == [0, 2, 3, 3]
    assert len(set(copies.tolist())) == 3


# --- Tables in, faults named ---------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".tsv", ".jsonl"])
def test_every_table_format_reads_the_same(tmp_path: Path, suffix: str) -> None:
    frame = synthetic_judgements(segments=3)
    path = tmp_path / f"judged{suffix}"

    def write(frame: pd.DataFrame) -> None:
        if suffix == ".parquet":
            frame.to_parquet(path)
        elif suffix == ".jsonl":
            frame.to_json(path, orient="records", lines=True, force_ascii=False)
        else:
            frame.to_csv(path, sep="," if suffix == ".csv" else "\t", index=False)

    write(frame)
    table = check_judgements(read_table(path), path, DEFAULT_COLUMNS)
    assert table["human"].tolist() == frame["score"].astype(float).tolist()
    assert table["segment"].tolist() == frame["uniq_id"].tolist()
    # A job's process plans from the three columns alone, as the main process from the
    # checked table; it does not check the rest (a bad score there is the main process's).
    source = JudgementSource((path,), DEFAULT_COLUMNS, True, {"path": str(path)})
    directions = [Direction(*name.split("-")) for name in DIRECTIONS]
    planned = judged_systems(source, directions, tmp_path, check=True)
    assert judged_systems(source, directions, tmp_path, check=False) == planned
    assert sorted(planned) == sorted(frame["system"].unique())
    frame["score"] = frame["score"].astype(str)
    frame.loc[0, "score"] = "n/a"
    write(frame)
    with pytest.raises(JudgementError, match="row 1, field score"):
        judged_systems(source, directions, tmp_path, check=True)
    assert judged_systems(source, directions, tmp_path, check=False) == planned


def test_faults_are_named_by_file_row_and_field(tmp_path: Path) -> None:
    frame = synthetic_judgements(segments=2)
    path = tmp_path / "judged.csv"
    with pytest.raises(JudgementError, match=r"judged.csv: missing score \(column 'score'\)"):
        checked(frame.drop(columns="score"), path)
    bad = frame.astype({"score": object})
    bad.loc[4, "score"] = "n/a"
    with pytest.raises(JudgementError, match=r"judged.csv, row 5, field score \(column 'score'\)"):
        checked(bad, path)
    unknown = frame.copy()
    unknown.loc[3, "tgt_lang"] = "xyz_Latn"
    known = [Direction.parse(name) for name in DIRECTIONS]
    with pytest.raises(JudgementError, match=r"row 4, field src_lang.*not a direction"):
        checked(unknown, path, known_directions=known)
    malformed = frame.copy()
    malformed.loc[0, "src_lang"] = "English"
    with pytest.raises(JudgementError, match=r"row 1, field src_lang.*not a BOUQuET language"):
        checked(malformed, path)


def test_met_bouquet_columns_that_differ_are_named(tmp_path: Path) -> None:
    frame = synthetic_judgements(segments=1).rename(columns={"score": "xsts"})
    with pytest.raises(JudgementError, match=r"docs/metaeval.md assumes.*metaeval.columns"):
        check_judgements(frame, tmp_path / "m.parquet", DEFAULT_COLUMNS, assumed_layout=True)
    mapped = {**DEFAULT_COLUMNS, "score": "xsts"}
    assert len(check_judgements(frame, tmp_path / "m.parquet", mapped)) == len(frame)


def test_judgements_off_by_default_and_missing_file_named(tmp_path: Path) -> None:
    settings = {"judgements": None, "columns": DEFAULT_COLUMNS, "higher_is_better": True}
    assert resolve_judgements(settings) is None
    with pytest.raises(ConfigError, match=r"metaeval.judgements: file .* not found"):
        resolve_judgements({**settings, "judgements": str(tmp_path / "absent.csv")})


# --- Through the workflow --------------------------------------------------------------------


def metaeval_config(judgements: Path, **metaeval) -> dict:
    return {
        "dataset": {"path": str(SAMPLE)},
        "shards": 1,
        "metrics": ["chrf", "bleu"],
        "resources": SMALL_JOBS,
        "statistics": {"bootstrap_resamples": 20},
        "metaeval": {"judgements": str(judgements), "permutation_trials": 20, **metaeval},
        "models": [{"name": "reference", "translator": "reference"}],
    }


def test_metaeval_target_scores_judged_translations_with_the_score_jobs(
    workflow: Workflow, tmp_path: Path
) -> None:
    """The judged systems are named as paths (absolute, climbing out of the work folder),
    with Snakemake's path variable and wildcard syntax, and too long for a file name: they
    are scored under folder names of their own, and every file the run writes is among its
    outputs, logs and Snakemake's records."""
    hostile = {
        "good": str(tmp_path / "project" / "requirements"),
        "fair": "../../../outside/<b>",
        "poor": "poor{x}" + "y" * 300,
    }
    table = sample_judgements()
    path = tmp_path / "judged.parquet"
    table.assign(system=table["system"].map(hostile)).to_parquet(path)
    workflow.write_config(metaeval_config(path))
    before = files_under(tmp_path)
    workflow.run("metaeval")
    work = workflow.workdir
    kept = (work / "runs", work / "logs", work / ".snakemake")
    written = files_under(tmp_path) - before
    assert all(any(folder in path.parents for folder in kept) for path in written), written
    assert not (tmp_path / "project").exists() and not (tmp_path / "outside").exists()
    folders = {system: folder_name(name) for system, name in hostile.items()}
    assert folders["fair"] == "outside_b_" and folders["poor"].startswith("poor_x_yyyy")
    runs = workflow.workdir / "runs"
    frame = pd.read_csv(runs / "metaeval" / "correlations.csv")
    # The score jobs scored each system: one log per job, its scored files beside.
    for system in folders.values():
        logs = list((workflow.workdir / "logs" / "metaeval" / system / "score").rglob("*.log"))
        assert logs, system
        assert list((runs / "metaeval" / "systems" / system).glob("*.scored.parquet")), system
    # chrF++ as sacreBLEU scores each translation, correlated independently.
    chrf = sacrebleu.CHRF(word_order=2)
    table["chrfpp"] = [
        chrf.sentence_score(mt, [ref]).score
        for mt, ref in zip(table["mt_text"], table["tgt_text"], strict=True)
    ]
    for name in ("eng_Latn-fra_Latn", "deu_Latn-eng_Latn"):
        part = table[table["src_lang"] + "-" + table["tgt_lang"] == name]
        row = frame[(frame["name"] == name) & (frame["metric"] == "chrfpp")].iloc[0]
        expected = scipy_stats.kendalltau(part["chrfpp"], part["score"]).statistic
        assert abs(row["kendall"] - expected) < TOLERANCE
        assert row["n_segments"] == len(part) and row["n_systems"] == 3
    assert set(frame["metric"]) == {"chrfpp", "bleu"}
    assert "Which metric to trust" in (runs / "metaeval" / "which-metric.html").read_text()
    # Resumable: a second run has nothing to do.
    again = workflow.run("metaeval")
    assert "Nothing to be done" in again.stdout + again.stderr
    check_mtme_export(runs / "mtme" / "metbouquet", frame, set(folders.values()))
    # The names are data: MTME's system names are the folder names, the table's beside them.
    named = pd.read_csv(runs / "mtme" / "metbouquet" / "systems.csv")
    assert dict(zip(named["name"], named["system"], strict=True)) == {
        name: folders[system] for system, name in hostile.items()
    }
    # The leaderboard notes each metric's pooled agreement.
    workflow.run()
    (page,) = (runs / "report").glob("leaderboard*.html")
    assert "Agreement with people: chrfpp: acc-eq " in page.read_text(encoding="utf-8")


def check_mtme_export(test_set: Path, frame: pd.DataFrame, folders: set[str]) -> None:
    """MTME's layout read as MTME reads it; its correlations, computed as MTME does over the
    cells with a human score (no grouping; systems by their system-level files), are
    correlations.csv's."""
    for lp in ("eng_Latn-fra_Latn", "deu_Latn-eng_Latn"):
        pair = read_language_pair(test_set, lp)
        assert set(pair.systems) == folders
        human_seg = pair.human["seg"]["human"]
        for metric in ("chrfpp", "bleu"):
            metric_seg = pair.scores["seg"][f"{metric}-refA"]
            cells = [
                (m, h)
                for system in sorted(pair.systems)
                for m, h in zip(metric_seg[system], human_seg[system], strict=True)
                if h is not None
            ]
            m, h = np.array(cells).T
            row = frame[(frame["name"] == lp) & (frame["metric"] == metric)].iloc[0]
            assert abs(scipy_stats.kendalltau(m, h).statistic - row["kendall"]) < TOLERANCE
            assert abs(scipy_stats.pearsonr(m, h).statistic - row["pearson"]) < TOLERANCE
            systems = sorted(pair.systems)
            metric_sys = [pair.scores["sys"][f"{metric}-refA"][s][0] for s in systems]
            human_sys = [pair.human["sys"]["human"][s][0] for s in systems]
            expected = scipy_stats.pearsonr(metric_sys, human_sys).statistic
            assert abs(expected - row["system_pearson"]) < TOLERANCE


@pytest.mark.parametrize(
    ("fault", "named"),
    [
        ("missing column", r"judged.csv: missing score \(column 'score'\)"),
        ("non-numeric score", r"judged.csv, row 3, field score \(column 'score'\): is 'good'"),
        (
            "unknown direction",
            r"judged.csv, row 2, field src_lang .*not a direction of the dataset",
        ),
        (
            "system that names no folder",
            r"judged.csv, row 2, field system \(column 'system'\): '\\x1b\]0;x\\x07' holds "
            r"the control character U\+001B: a judged system's name names files",
        ),
    ],
)
def test_bad_judgements_stop_the_run_before_any_job(
    workflow: Workflow, tmp_path: Path, fault: str, named: str
) -> None:
    table = sample_judgements().astype({"score": object})
    if fault == "missing column":
        table = table.drop(columns="score")
    elif fault == "non-numeric score":
        table.loc[2, "score"] = "good"
    elif fault == "system that names no folder":
        table.loc[1, "system"] = "\x1b]0;x\x07"
    else:
        table.loc[1, ["src_lang", "tgt_lang"]] = ["eng_Latn", "swh_Latn"]
    path = tmp_path / "judged.csv"
    table.to_csv(path, index=False)
    workflow.write_config(metaeval_config(path))
    result = workflow.run("metaeval", check=False)
    assert result.returncode != 0
    assert re.search(named, result.stderr), result.stderr
    assert not (workflow.workdir / "runs").exists()
    assert not (workflow.workdir / "logs").exists()


def test_jsonl_judgements_with_mapped_columns(workflow: Workflow, tmp_path: Path) -> None:
    table = sample_judgements().rename(columns={"score": "xsts", "system": "engine"})
    path = tmp_path / "judged.jsonl"
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in table.to_dict("records")),
        encoding="utf-8",
    )
    config = metaeval_config(path, columns={"score": "xsts", "system": "engine"})
    workflow.write_config(config)
    plan = workflow.run("metaeval", "--dry-run").stdout
    jobs = dict(re.findall(r"^(\S+)\s+(\d+)$", plan, re.MULTILINE))
    assert jobs["metaeval"] == "1" and jobs["metaeval_inputs"] == "1"
    # chrF++ and BLEU are one family, whose jobs write the scored files: one job per system.
    score_jobs = {rule for rule in jobs if rule.startswith("score_")}
    systems = ("good", "fair", "poor")
    assert score_jobs == {f"score_workflow_cpu_metaeval_{s}_shard0of1" for s in systems}


# --- Met-BOUQuET from the Hub ----------------------------------------------------------------


def test_met_bouquet_is_prefetched_then_evaluated_offline(
    dataset: Path, tmp_path: Path, workflow: Workflow
) -> None:
    table = sample_judgements()
    with HubServer() as hub:
        bouquet = bouquet_on_hub(hub, dataset)
        met_bouquet_on_hub(bouquet, table, tmp_path / "judged")
        hub.grant("hf_reader", bouquet)
        workflow.write_config(met_bouquet_config())
        cache = tmp_path / "hf"
        workflow.run("prefetch", env=hub.environment(cache, token="hf_reader"))
        assert set(MET_BOUQUET_FILES) <= {download.split("/", 3)[3] for download in hub.downloads()}
        log = (workflow.workdir / "logs" / "prefetch.log").read_text()
        assert "metaeval judgements:" in log and bouquet.branches["main"] in log
        hub.clear()
        workflow.run("metaeval", env={**hub.environment(cache), "HF_HUB_OFFLINE": "1"})
        assert hub.requests == []
    frame = pd.read_csv(workflow.workdir / "runs" / "metaeval" / "correlations.csv")
    assert frame[frame["name"] == "all"]["n_segments"].tolist() == [len(table)]


def test_met_bouquet_layout_that_differs_is_named(
    dataset: Path, tmp_path: Path, workflow: Workflow
) -> None:
    with HubServer() as hub:
        bouquet = bouquet_on_hub(hub, dataset)
        hub.grant("hf_reader", bouquet)
        workflow.write_config(met_bouquet_config())
        environment = hub.environment(tmp_path / "hf", token="hf_reader")
        result = workflow.run("metaeval", "--dry-run", check=False, env=environment)
        assert result.returncode != 0
        assert "no parquet files under met_bouquet/" in result.stderr
        assert "top-level entries README.md, benchmark_data" in result.stderr
        judged = tmp_path / "judged"
        judged.mkdir()
        sample_judgements().rename(columns={"score": "xsts"}).to_parquet(judged / "all.parquet")
        bouquet.commit(dict(files_of(judged, "met_bouquet/")))
        result = workflow.run("metaeval", "--dry-run", check=False, env=environment)
    assert result.returncode != 0
    assert "all.parquet: missing score (column 'score')" in result.stderr
    assert "differ from the layout docs/metaeval.md assumes" in result.stderr


def test_the_metaeval_subcommand(tmp_path: Path) -> None:
    path = tmp_path / "judged.csv"
    sample_judgements().to_csv(path, index=False)
    quick = {"statistics": {"bootstrap_resamples": 20}, "metaeval": {"permutation_trials": 20}}
    (tmp_path / "quick.yaml").write_text(json.dumps(quick), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "bouquet_eval", "metaeval", "--output-dir", "runs/judged",
         "--judgements", "judged.csv", "--metrics", "chrf", "--dataset-path", str(SAMPLE),
         "--cores", "2", "--", "--configfile", "quick.yaml"],
        cwd=tmp_path, env=Workflow.environment(), capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "agreement with people in" in result.stdout
    frame = pd.read_csv(tmp_path / "runs" / "metaeval" / "correlations.csv")
    assert set(frame["metric"]) == {"chrfpp"} and len(frame) == 2 + 3
    saved = (tmp_path / "runs" / "judged" / "bouquet-eval.yaml").read_text(encoding="utf-8")
    assert f"judgements: {path}" in saved


# --- The report page ----------------------------------------------------------------------


SEGMENT_LEVEL = ("pearson", "spearman", "kendall", "acc_eq")


def correlations_at_scale(directions: list[Direction], seed: int = 0) -> pd.DataFrame:
    """correlations.csv's columns for many directions: three metrics whose agreement varies by
    direction (MetricX best in most, chrF++ in some, the composite headline weak in a few),
    MetricX and the composite weaker where mT5 never saw the languages."""
    rng = np.random.default_rng(seed)
    metrics = ("chrfpp", "metricx", "glotlid_x_metricx")
    learned = MetricSet.of(["chrf", "metricx", "glotlid"], {})
    records = []
    for direction in directions:
        trained = learned.trained_columns(direction.src_lang, direction.tgt_lang)
        levels = {"chrfpp": 0.45, "metricx": 0.55, "glotlid_x_metricx": 0.5}
        if not trained["metricx"]:
            levels["metricx"] = levels["glotlid_x_metricx"] = 0.4
        if rng.random() < 0.1:
            levels["glotlid_x_metricx"] = 0.02
        values = {m: levels[m] + rng.normal(scale=0.05) for m in metrics}
        best = max(values, key=values.__getitem__)
        for metric in metrics:
            value = values[metric]
            p = 0.001 if values[best] - value > 0.08 else 0.4
            records.append(
                {
                    "scope": "direction",
                    "name": direction.name,
                    "src_lang": direction.src_lang,
                    "tgt_lang": direction.tgt_lang,
                    "metric": metric,
                    "n_segments": 854 * 4,
                    "n_systems": 4,
                    **{s: value for s in ("pearson", "spearman", "kendall", "acc_eq")},
                    **{
                        f"{s}_low": value - 0.04
                        for s in ("pearson", "spearman", "kendall", "acc_eq")
                    },
                    **{
                        f"{s}_high": value + 0.04
                        for s in ("pearson", "spearman", "kendall", "acc_eq")
                    },
                    "acc_eq_epsilon": 0.1,
                    "system_accuracy": 0.8,
                    "best": metric == best,
                    "p_vs_best": np.nan if metric == best else p,
                    "p_vs_best_adjusted": np.nan if metric == best else p,
                    "best_significantly_better": pd.NA if metric == best else p < 0.05,
                    "trained_on_languages": trained.get(metric, pd.NA),
                }
            )
    seen = pd.DataFrame(records).query("metric == 'metricx'")["trained_on_languages"].astype(bool)
    count = {"all": len(directions), "inside": int(seen.sum()), "outside": int((~seen).sum())}
    pools = [("pooled", pool) for pool in POOLS]
    # MetricX and the composite share their training languages, and so their pools.
    pools += [
        ("training", f"{where}:metricx,glotlid_x_metricx") for where in count if where != "all"
    ]
    for scope, pool in pools:
        part = count.get(pool.split(":")[0], len(directions) // 2)
        for metric in metrics:
            records.append(
                {
                    "scope": scope, "name": pool, "metric": metric,
                    "n_segments": 854 * 4 * part, "n_systems": 4,
                    "kendall": 0.5, "kendall_low": 0.49, "kendall_high": 0.51,
                    "acc_eq": 0.55, "acc_eq_low": 0.54, "acc_eq_high": 0.56,
                    "system_accuracy": 0.8, "best": metric == "metricx",
                    "best_significantly_better": pd.NA, "trained_on_languages": pd.NA,
                }
            )  # fmt: skip
    return pd.DataFrame(records)


def test_trust_data_names_best_margin_and_headline_disagreement() -> None:
    frame = correlations_at_scale([Direction.parse(name) for name in DIRECTIONS], seed=3)
    data = trust_data(frame, "acc_eq", 0.05)
    assert data["headline"] == "glotlid_x_metricx"
    for row in data["directions"]:
        rows = frame[(frame["name"] == row["direction"])].sort_values("acc_eq", ascending=False)
        assert row["best"] == rows.iloc[0]["metric"]
        assert abs(row["margin"] - (rows.iloc[0]["acc_eq"] - rows.iloc[1]["acc_eq"])) < 1e-4
        headline = rows[rows["metric"] == "glotlid_x_metricx"].iloc[0]
        worse = headline["best_significantly_better"] is True
        assert (row["headline"] == HEADLINE_STATES["worse"]) == (
            worse and headline["kendall_low"] > 0
        )
    assert data["directions"][0]["source"] == "Standard Arabic"  # arb_Arab-fra_Latn
    notes = agreement_notes(frame, "acc_eq")
    assert notes[0].startswith("chrfpp: acc-eq 0.550 [0.540, 0.560] with human judgements")


def test_agreement_inside_and_outside_training_languages() -> None:
    """CometKiwi's model (XLM-R) never saw Yoruba: the directions from or into it are outside
    its training languages (it reads the source), the others inside. Every metric's statistics
    over each part equal scipy's; the page shows them, and which directions it never saw."""
    inside, outside = ["eng_Latn-fra_Latn", "deu_Latn-eng_Latn"], ["yor_Latn-eng_Latn",
                                                                   "eng_Latn-yor_Latn"]  # fmt: skip
    table = checked(synthetic_judgements(directions=inside + outside))
    metrics = scored_columns(["chrf", "cometkiwi"], {})
    assert metrics.columns == ["chrfpp", "cometkiwi"]
    trained = metrics.trained(table)
    direction = table["src_lang"] + "-" + table["tgt_lang"]
    assert set(trained) == {"cometkiwi"}
    assert (trained["cometkiwi"] == direction.isin(inside).to_numpy()).all()
    # Known structure: CometKiwi close to people where it saw the languages, far elsewhere.
    rng = np.random.default_rng(6)
    human = table["human"].to_numpy()
    noise = np.where(trained["cometkiwi"], 0.3, 4.0)
    table["cometkiwi"] = human + rng.normal(size=len(table)) * noise
    table["chrfpp"] = human + rng.normal(scale=1.0, size=len(table))
    scores = {m: table[m].to_numpy() for m in ("chrfpp", "cometkiwi")}
    settings = Settings(bootstrap_resamples=30, permutation_trials=30, decide_by="kendall")
    frame = correlations(table, scores, settings, trained)
    training = frame[frame["scope"] == "training"]
    assert set(training["name"]) == {"inside:cometkiwi", "outside:cometkiwi"}
    for record in training.itertuples():
        part = table[direction.isin(inside if record.name.startswith("inside") else outside)]
        assert record.n_segments == len(part)
        for statistic, value in scipy_row(part, record.metric).items():
            assert abs(getattr(record, statistic) - value) < TOLERANCE, (record.name, statistic)
    best = training[training["best"]].set_index("name")["metric"]
    assert best.to_dict() == {"inside:cometkiwi": "cometkiwi", "outside:cometkiwi": "chrfpp"}
    rows = frame[frame["scope"] == "direction"]
    seen = rows[rows["metric"] == "cometkiwi"].set_index("name")["trained_on_languages"]
    assert seen.to_dict() == {**dict.fromkeys(inside, True), **dict.fromkeys(outside, False)}
    assert rows[rows["metric"] == "chrfpp"]["trained_on_languages"].isna().all()
    # The page, from correlations.csv as written and read back.
    data = trust_data(pd.read_csv(io.StringIO(frame.to_csv(index=False))), "kendall", 0.05)
    split = {row["pool"]: row for row in data["pools"] if row["training"]}
    assert list(split) == [
        "inside the training languages of cometkiwi",
        "outside the training languages of cometkiwi",
    ]
    inside_pool, outside_pool = split.values()
    assert inside_pool["directions"] == outside_pool["directions"] == 2
    assert [v["best"] for v in inside_pool["values"]] == [False, True]
    assert [v["best"] for v in outside_pool["values"]] == [True, False]
    unseen = {row["direction"]: row["unseen_by"] for row in data["directions"]}
    assert unseen == {**dict.fromkeys(inside, ""), **dict.fromkeys(outside, "cometkiwi")}


def test_trust_page_reads_at_benchmark_scale(tmp_path: Path) -> None:
    browser.require()
    directions = bouquet_shaped_directions()
    data = trust_data(correlations_at_scale(directions), "acc_eq", 0.05)
    page_path = tmp_path / "which-metric.html"
    page_path.write_text(trust_page(data), encoding="utf-8")
    shots = Path(os.environ.get("BOUQUET_EVAL_SHOTS", tmp_path))

    async def browse() -> None:
        async with browser.chromium() as page:
            await page.open(page_path.as_uri())
            rows = await page.wait_for("document.getElementById('app').dataset.rows")
            assert rows == str(len(directions)) == "1062"
            pools = await page.evaluate(
                "[...document.querySelectorAll('#pooled tbody tr')].map((r) => r.innerText)"
            )
            # Every direction, into and out of English, between two other languages (BOUQuET's
            # 528 regional pairs), then inside and outside the training languages of MetricX
            # (and of the composite, which shares them).
            assert len(pools) == 6 and pools[0].startswith("all directions\t1062\t")
            assert pools[3].startswith("between two other languages\t528\t")
            assert pools[4].startswith("inside the training languages of metricx, glotlid")
            unseen = sum(bool(row["unseen_by"]) for row in data["directions"])
            assert 0 < unseen < len(directions)
            await page.screenshot(shots / "metaeval-all.png")
            await page.evaluate("document.querySelectorAll('.tabs button')[1].click()")
            disagreeing = await page.wait_for(
                "document.getElementById('app').dataset.view === 'disagree'"
                " && document.getElementById('app').dataset.rows"
            )
            assert int(disagreeing) == data["disagreeing"] > 0
            await page.screenshot(shots / "metaeval-disagree.png")
            assert page.errors == []

    asyncio.run(browse())


def test_mtme_export_of_unjudged_cells(tmp_path: Path) -> None:
    table = checked(synthetic_judgements(segments=6)).drop(index=[1, 13]).reset_index(drop=True)
    rng = np.random.default_rng(2)
    scores = {"chrfpp": table["human"].to_numpy() + rng.normal(size=len(table))}
    frame = correlations(table, scores, Settings(bootstrap_resamples=5, permutation_trials=5))
    export_judgements(tmp_path, table, scores, set(), {name: name for name in SYSTEMS})
    lp = DIRECTIONS[0]
    pair = read_language_pair(tmp_path, lp)
    human = pair.human["seg"]["human"]
    assert sum(value is None for values in human.values() for value in values) == 2
    cells = np.array(
        [
            (m, h)
            for system in pair.systems
            for m, h in zip(pair.scores["seg"]["chrfpp-refA"][system], human[system], strict=True)
            if h is not None
        ]
    ).T
    row = frame[(frame["name"] == lp)].iloc[0]
    assert abs(scipy_stats.kendalltau(*cells).statistic - row["kendall"]) < TOLERANCE
